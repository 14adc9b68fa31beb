"""Each collective of an NPU capture, from torch_npu's ``communication.json``, for
``output/waits``: the same rows a torch trace gives (``collectives.py``).

The file holds, per step (``step2``) and per kind (``collective``, ``p2p``), each HCCL operator
by its own name (``hcom_allReduce__483_2@9350434047717501483``: kind, the operator's number in
its group, the group's hash), with its ``Start Timestamp(us)`` and ``Elapse Time(ms)``. The name
is the same on every member, so it matches across ranks as it is; the group's hash is kept only
to match by, and named by the layout from the ranks that hold it (``waits/layout.py``).
"""

import json
import os
from typing import List, Optional

from ...layout import ASCEND_OUTPUT_DIR
from ..read import numbers

FILE = "communication.json"


def read(path: str) -> List[list]:
    """[step, name, group, bytes, start_us, end_us] of the capture at ``path`` (its
    ``*_ascend_pt`` folder); [] when it has no readable communication.json."""
    file = os.path.join(path, ASCEND_OUTPUT_DIR, FILE)
    try:
        with open(file, "rb") as handle:
            data = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return []  # the report's communication section says why
    found = []
    for step_name, kinds in data.items() if isinstance(data, dict) else ():
        step = _step(step_name)
        if step is None or not isinstance(kinds, dict):
            continue
        for ops in kinds.values():
            for name, info in ops.items() if isinstance(ops, dict) else ():
                times = info.get("Communication Time Info") if isinstance(info, dict) else None
                if name == "Total Op Info" or not isinstance(times, dict):
                    continue
                start, elapse = _finite(times.get("Start Timestamp(us)")), \
                    _finite(times.get("Elapse Time(ms)"))
                if start is None or elapse is None or elapse < 0:
                    continue
                group = name.rsplit("@", 1)[1] if "@" in name else ""
                found.append([step, name, f"hccl:{group}", None, start, start + elapse * 1000.0])
    found.sort(key=lambda c: (c[4], c[1]))
    return found


def _step(name):
    tail = str(name)[4:] if str(name).startswith("step") else ""
    return int(tail) if tail.isascii() and tail.isdigit() else None


def _finite(value) -> Optional[float]:
    """``value`` as a float when it is a readable time (``read/numbers.py``: a NaN, Infinity or
    a number past any clock is none); None otherwise."""
    return numbers.time_us(value) if isinstance(value, (int, float)) else None
