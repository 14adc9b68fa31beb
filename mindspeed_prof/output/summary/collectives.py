"""Each collective's work in a torch trace, kept in summary's one pass for ``output/waits``.

Which events are a collective running (one per call, so ranks' lists line up):

- a trace with NCCL/HCCL kernels: those kernels (the device's arrival and end);
- else the backend's own annotations (``gloo:all_reduce``, ``nccl:*``, ``hccl:*``): the
  collective on the backend's thread, from when it starts to when every member has joined and
  the data moved (the caller's ``c10d::allreduce_`` only enqueues it when asynchronous);
- else the calls themselves (``c10d::*``, ``record_param_comms``), the outermost of a nest.

Each is put in the ``ProfilerStep#N`` it starts in (the device's step span when annotated),
with its group (kineto's ``Process Group Ranks``, else its name) and size in bytes where the
trace says them. A collective outside every step is left out: it cannot be matched by step.

Where the trace names no group (gloo on the CPU: torch writes no ``Process Group Ranks`` for
it), the range it starts in may say which of the rank's groups it is: the schedule marks of
the gradient reduce and parameter gather (the DP group's, ``config/schedule_marks.py``), the
pipeline's send/receive marks (the PP peers'), Megatron's tensor-parallel autograd ops
(``megatron/core/tensor_parallel``: the TP group's). Its group is then ``scope:dp`` /
``scope:pp`` / ``scope:tp``, which ``output/waits/match.py`` resolves with the layout. The
range is found by time on any thread: the backend runs the collective on its own thread,
started from inside the caller's range.
"""

import bisect
import math
from typing import Dict, List, Optional, Tuple

from ...config import schedule_marks as marks
from .torchsteps import CPU_COMM, DEVICE_COMM

KINDS = (CPU_COMM, DEVICE_COMM)
BACKEND_MARKS = ("gloo:", "nccl:", "hccl:")
DTYPE_BYTES = {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int": 4, "long": 8,
               "float32": 4, "float16": 2, "float64": 8, "int32": 4, "int64": 8, "byte": 1,
               "char": 1, "bool": 1, "short": 2, "int8": 1, "uint8": 1}
SCOPE = "scope:"  # the group a range names (see above): ``scope:tp``
# megatron/core/tensor_parallel's autograd ops whose collectives are over the TP group (their
# backward is ``<name>Backward``, under ``autograd::engine::evaluate_function: ...``)
TP_OPS = ("_CopyToModelParallelRegion", "_ReduceFromModelParallelRegion",
          "_ScatterToModelParallelRegion", "_GatherFromModelParallelRegion",
          "_ScatterToSequenceParallelRegion", "_GatherFromSequenceParallelRegion",
          "_ReduceScatterToSequenceParallelRegion", "_AllGatherFromTensorParallelRegion",
          "_ReduceScatterToTensorParallelRegion", "_VocabParallelCrossEntropy",
          "LinearWithGradAccumulationAndAsyncCommunication")
_AUTOGRAD = "autograd::engine::evaluate_function: "
# ranges named by what precedes their first space (a mark's fields follow it)
_SCOPES = {**{name: "dp" for name in marks.DATA_PARALLEL},
           **{name: "pp" for name in marks.P2P}}
LOOKBACK = 8  # enclosing ranges tried before a collective's start (ranges nest shallowly)


def scope_of(name: str) -> Optional[str]:
    """``tp`` / ``dp`` / ``pp`` when a range of this name holds collectives of that group."""
    head = name.split(" ", 1)[0]
    if head in _SCOPES:
        return _SCOPES[head]
    if name.startswith(_AUTOGRAD):
        name = name[len(_AUTOGRAD):]
    if name.startswith(TP_OPS):
        return "tp"
    return None


class Found:
    """The candidate events of one trace, as the pass meets them."""

    def __init__(self) -> None:
        self.events: List[tuple] = []  # (kind, name, thread, start, dur, group, bytes)
        self.scopes: List[Tuple[float, float, str]] = []  # (start, end, group kind)

    def add(self, event: dict, name: str, kind: int, thread, ts: float, dur: float) -> None:
        if not (math.isfinite(ts) and math.isfinite(dur)):
            return  # a NaN or Infinity read from the file is no time (summary says so)
        args = event.get("args")
        group, size = ("", None) if not isinstance(args, dict) else (_group(args), _bytes(args))
        self.events.append((kind, name, thread, ts, dur, group, size))

    def scope(self, kind: str, ts: float, dur: float) -> None:
        """A range whose collectives are ``kind``'s (``scope_of``)."""
        if math.isfinite(ts) and math.isfinite(dur):
            self.scopes.append((ts, ts + dur, kind))

    def ordered(self, spans: Dict[int, Tuple[float, float]],
                device_spans: Dict[int, Tuple[float, float]]) -> List[list]:
        """[step, name, group, bytes, start, end] of the chosen events, by start."""
        device = [e for e in self.events if e[0] == DEVICE_COMM]
        if device:
            chosen, steps = device, device_spans or spans
        else:
            marked = [e for e in self.events if e[1].lower().startswith(BACKEND_MARKS)]
            chosen, steps = (marked or _outermost(self.events)), spans
        bounds = sorted((ts, ts + dur, n) for n, (ts, dur) in steps.items()
                        if ts is not None and dur is not None)
        starts = [b[0] for b in bounds]
        scopes = sorted(self.scopes)
        scope_starts = [s[0] for s in scopes]
        result = []
        for _, name, _, ts, dur, group, size in sorted(chosen, key=lambda e: (e[3], e[1])):
            at = bisect.bisect_right(starts, ts) - 1
            if at >= 0 and ts <= bounds[at][1]:
                if not group and scopes:
                    group = _scope(scopes, scope_starts, ts)
                result.append([bounds[at][2], name, group, size, ts, ts + dur])
        return result


def _scope(scopes, starts, ts) -> str:
    """``scope:<kind>`` of the innermost range holding ``ts`` (the latest-starting one of the
    last few before it), or ``""``."""
    at = bisect.bisect_right(starts, ts) - 1
    for start, end, kind in scopes[max(at - LOOKBACK, -1) + 1:at + 1][::-1]:
        if start <= ts <= end:
            return SCOPE + kind
    return ""


def _outermost(events: List[tuple]) -> List[tuple]:
    """The calls not inside another collective call of their thread."""
    kept: List[tuple] = []
    open_until: Dict[str, float] = {}
    for event in sorted(events, key=lambda e: (str(e[2]), e[3], -e[4])):
        thread, start, end = str(event[2]), event[3], event[3] + event[4]
        if start < open_until.get(thread, float("-inf")):
            continue
        open_until[thread] = end
        kept.append(event)
    return kept


def _group(args: dict) -> str:
    ranks = args.get("Process Group Ranks")
    if isinstance(ranks, list):
        return ",".join(str(r) for r in ranks)
    if isinstance(ranks, str) and ranks.strip("[] "):
        return ",".join(p.strip() for p in ranks.strip("[] ").split(","))
    for key in ("Process Group Name", "Process Group Description"):
        if isinstance(args.get(key), (str, int)) and not isinstance(args.get(key), bool):
            return f"name:{args[key]}"
    return ""


def _bytes(args: dict) -> Optional[float]:
    count = args.get("In msg nelems")
    width = DTYPE_BYTES.get(str(args.get("dtype", "")).lower())
    if isinstance(count, (int, float)) and not isinstance(count, bool) and width \
            and math.isfinite(count):
        return float(count) * width
    return None
