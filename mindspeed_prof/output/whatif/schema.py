"""The per-op table's schema and the job's metadata, as the paper's published analyzer
(ByteDance-Seed/StragglerAnalysis) reads them, so a table we write runs through it unchanged.

Times are seconds (``start_ts`` relative to the step's first op, float32 as the artifact stores
them); ``seq_id`` numbers the ops of one type on one worker in one step by start time; ``mc`` is
the model chunk within the stage, ``gmc`` the chunk's place in the whole model and ``mb_id`` the
microbatch (-1 where an op has none).
"""

import dataclasses
import os
from typing import Any, Dict, Tuple

from ...errors import ConfigError

# (column, Arrow type name): the artifact's traces store exactly these.
COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("dp_rank", "int8"), ("stage", "int8"), ("rank", "int16"), ("step", "int64"),
    ("optype", "dictionary<values=string, indices=int8, ordered=0>"), ("start_ts", "float"),
    ("duration", "float"), ("seq_id", "int32"), ("mc", "int8"), ("mb_id", "int8"),
    ("gmc", "int16"))
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)

# The op types (Megatron's timer names) the dependency model knows.
# Those the schedule marks record are the marks' own names (config/schedule_marks.py); the rest
# are timers of the paper's table that no mark of ours records.
from ...config.schedule_marks import (BACKWARD_COMPUTE, BACKWARD_RECV, BACKWARD_SEND,  # noqa: E402
                                      FORWARD_COMPUTE, FORWARD_RECV, FORWARD_SEND,
                                      GRADS_REDUCE_SCATTER, OPTIMIZER, PARAMS_ALL_GATHER)

SEPARATE_GRADS_ALL_REDUCE = "separate-grads-all-reduce"
LAYERNORM_GRADS_ALL_REDUCE = "layernorm-grads-all-reduce"
EMBEDDING_GRADS_ALL_REDUCE = "embedding-grads-all-reduce"
OPTIMIZER_CLIP_MAIN_GRAD = "optimizer-clip-main-grad"
GC = "gc"

COMPUTE = (FORWARD_COMPUTE, BACKWARD_COMPUTE)
P2P = (FORWARD_SEND, FORWARD_RECV, BACKWARD_SEND, BACKWARD_RECV)
DP_COMM = (PARAMS_ALL_GATHER, SEPARATE_GRADS_ALL_REDUCE, GRADS_REDUCE_SCATTER)
# Communication "in concept": its typical duration is the median (a few slow transfers do not
# move it), where a computation's is the mean.
COMMUNICATION = P2P + DP_COMM + (LAYERNORM_GRADS_ALL_REDUCE, EMBEDDING_GRADS_ALL_REDUCE,
                                 OPTIMIZER_CLIP_MAIN_GRAD)
KNOWN = COMPUTE + P2P + DP_COMM + (LAYERNORM_GRADS_ALL_REDUCE, EMBEDDING_GRADS_ALL_REDUCE,
                                   OPTIMIZER_CLIP_MAIN_GRAD, OPTIMIZER, GC)
# Attribution by op type counts a send and its receive as one pipeline transfer.
ATTRIBUTION_TYPE = {FORWARD_SEND: "forward-pp-comm", FORWARD_RECV: "forward-pp-comm",
                    BACKWARD_SEND: "backward-pp-comm", BACKWARD_RECV: "backward-pp-comm"}

META_KEYS = ("trial_name", "run_id", "dp_size", "dsp_size", "pp_size", "tp_size", "vpp_size",
             "world_size")


@dataclasses.dataclass(frozen=True)
class JobMeta:
    """The job's parallel layout, as the artifact's ``meta-*.yaml`` holds it."""

    trial_name: str
    run_id: int = 0
    dp_size: int = 1
    dsp_size: int = 1
    pp_size: int = 1
    tp_size: int = 1
    vpp_size: int = 1
    world_size: int = 1

    def as_dict(self) -> Dict[str, Any]:
        return {key: getattr(self, key) for key in META_KEYS}


def read_meta(path: str) -> JobMeta:
    """``--meta`` FILE: a flat YAML mapping of ``META_KEYS``; any other shape is a usage error."""
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle.read(1 << 20))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"--meta {path}: cannot be read as YAML ({type(exc).__name__}); give "
                          f"the job's metadata file (trial_name, dp_size, pp_size, ...).") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--meta {path}: not a mapping; give the job's metadata file "
                          f"(trial_name, dp_size, pp_size, ...).")
    unknown = sorted(str(key) for key in data if key not in META_KEYS)
    if unknown:
        raise ConfigError(f"--meta {path}: unknown key {unknown[0]!r}; the keys are "
                          f"{', '.join(META_KEYS)}.")
    values: Dict[str, Any] = {}
    for key in META_KEYS:
        if key not in data:
            continue
        value = data[key]
        if key == "trial_name":
            values[key] = str(value)
        elif isinstance(value, bool) or not isinstance(value, int) or value < (
                0 if key == "run_id" else 1):
            raise ConfigError(f"--meta {path}: {key}={value!r} must be a positive integer.")
        else:
            values[key] = value
    values.setdefault("trial_name", os.path.splitext(os.path.basename(path))[0])
    return JobMeta(**values)
