"""The names of the pipeline schedule's marks: what the patches write and the readers parse.

Inside a window the schedule patches (``patches/megatron_schedules*.py``) mark Megatron's
pipeline schedule as named ranges, one per piece of work, named as Megatron's own timers so a
user who knows ``--timing-log-level`` reads them at once. One range name carries its place::

    forward-compute stage=1 chunk=0 mb=3
    forward-send stage=0 chunk=0 mb=3 peer=1
    backward-recv stage=0 chunk=1 mb=2 peer=1
    grads-reduce-scatter stage=1
    forward-backward stage=1 schedule=1f1b stages=2 chunks=1 microbatches=4

The timer comes first, then ``key=value`` fields separated by single spaces, in any order:

- ``stage``: the PP stage of the rank that recorded the range (0-based); every mark has it.
- ``chunk``: the virtual model chunk (0 without virtual stages).
- ``mb``: the microbatch id within the step (0-based), in that chunk's order.
- ``peer``: the global rank on the other end of a send or receive.
- on ``forward-backward`` (one per step, around the whole schedule): ``schedule``
  (``SCHEDULES``; ``replaced`` where another package's schedule holds Megatron's name),
  ``stages`` (p), ``chunks`` (v) and ``microbatches`` (m).

This module is a leaf (no imports beyond the standard library): the patches, the backends and
the readers (``pipeline``, ``whatif``, ``export``) all share it.
"""

import dataclasses
from typing import Dict, Optional

# Megatron's timer names for each piece of the schedule.
FORWARD_COMPUTE = "forward-compute"
BACKWARD_COMPUTE = "backward-compute"
FORWARD_SEND = "forward-send"
FORWARD_RECV = "forward-recv"
BACKWARD_SEND = "backward-send"
BACKWARD_RECV = "backward-recv"
# The combined exchanges of the steady phase (one p2p call both sends and receives).
FORWARD_SEND_BACKWARD_RECV = "forward-send-backward-recv"
BACKWARD_SEND_FORWARD_RECV = "backward-send-forward-recv"
FORWARD_SEND_FORWARD_RECV = "forward-send-forward-recv"
BACKWARD_SEND_BACKWARD_RECV = "backward-send-backward-recv"
FORWARD_BACKWARD_SEND_RECV = "forward-backward-send-forward-backward-recv"
GRADS_REDUCE_SCATTER = "grads-reduce-scatter"
GRADS_ALL_REDUCE = "grads-all-reduce"
PARAMS_ALL_GATHER = "params-all-gather"
OPTIMIZER = "optimizer"
FORWARD_BACKWARD = "forward-backward"  # the whole schedule of one step

COMPUTE = (FORWARD_COMPUTE, BACKWARD_COMPUTE)
P2P = (FORWARD_SEND, FORWARD_RECV, BACKWARD_SEND, BACKWARD_RECV, FORWARD_SEND_BACKWARD_RECV,
       BACKWARD_SEND_FORWARD_RECV, FORWARD_SEND_FORWARD_RECV, BACKWARD_SEND_BACKWARD_RECV,
       FORWARD_BACKWARD_SEND_RECV)
DATA_PARALLEL = (GRADS_REDUCE_SCATTER, GRADS_ALL_REDUCE, PARAMS_ALL_GATHER)
TIMERS = COMPUTE + P2P + DATA_PARALLEL + (OPTIMIZER, FORWARD_BACKWARD)

# The schedule families, as ``forward-backward``'s ``schedule`` field and the manifest name them.
NO_PIPELINING = "no-pipelining"
ONE_F_ONE_B = "1f1b"
INTERLEAVED = "interleaved"
# A schedule another package put in Megatron's place (MindSpeed's DualPipeV registers its
# ``forward_backward_pipelining_with_cutinhalf`` under 1F1B's name): marked, but no theory.
REPLACED = "replaced"
SCHEDULES = (NO_PIPELINING, ONE_F_ONE_B, INTERLEAVED, REPLACED)
# What the readers say where a capture's steps carry no microbatch marks.
NO_MICROBATCHES = ("no forward-compute / backward-compute ranges: a schedule another package "
                   "put in Megatron's place, such as MindSpeed's DualPipeV, computes through "
                   "functions of its own, which are not marked (docs/training.md)")

_INT_FIELDS = ("stage", "chunk", "mb", "peer", "stages", "chunks", "microbatches")


@dataclasses.dataclass(frozen=True)
class ScheduleMark:
    """One schedule range's name, parsed. Fields a mark does not carry are None."""

    timer: str
    stage: int
    chunk: Optional[int] = None
    mb: Optional[int] = None
    peer: Optional[int] = None
    schedule: Optional[str] = None
    stages: Optional[int] = None
    chunks: Optional[int] = None
    microbatches: Optional[int] = None

    @property
    def is_compute(self) -> bool:
        return self.timer in COMPUTE

    @property
    def is_p2p(self) -> bool:
        return self.timer in P2P


def name(timer: str, stage: int, *, chunk: Optional[int] = None, mb: Optional[int] = None,
         peer: Optional[int] = None, **fields: object) -> str:
    """The range name of ``timer`` at this place (fields left None are left out)."""
    parts = [timer, f"stage={stage}"]
    for key, value in (("chunk", chunk), ("mb", mb), ("peer", peer), *fields.items()):
        if value is not None:
            parts.append(f"{key}={value}")
    return " ".join(parts)


def parse(text: str) -> Optional[ScheduleMark]:
    """The mark a range name encodes, or None when it is not one of ours (any other range,
    or a damaged name: readers count those rather than guess)."""
    if not isinstance(text, str) or len(text) > 256:
        return None
    timer, _, rest = text.partition(" ")
    if timer not in TIMERS or not rest:
        return None
    fields: Dict[str, object] = {}
    for part in rest.split(" "):
        key, sep, value = part.partition("=")
        if not sep or key in fields:
            return None
        if key in _INT_FIELDS:
            if not value.isdigit() or len(value) > 9:
                return None
            fields[key] = int(value)
        elif key == "schedule" and value in SCHEDULES:
            fields[key] = value
        else:
            return None
    if "stage" not in fields:
        return None
    return ScheduleMark(timer=timer, **fields)  # type: ignore[arg-type]
