"""torch_npu's ``ASCEND_PROFILER_OUTPUT/communication_matrix.json`` of one capture: what each
link of each communication group moved.

The file holds, per step (``step2``), per kind (``collective``, ``p2p``) and per HCCL operator
(``hcom_allGather__483_3@9350434047717501483``: kind, number, the group's hash), one entry per
link ``"src-dst"`` with its ``Transport Type`` (HCCS, RDMA, PCIE, SIO, LOCAL), ``Transit
Size(MB)``, ``Transit Time(ms)`` and ``Bandwidth(GB/s)``. ``src`` and ``dst`` are ranks *of
the group* (its own numbering, 0 up), not the job's ranks: the same ``0-1`` is another link in
another group. ``Total Op Info`` repeats the operators' sums and is skipped.

Read whole but bounded (``MAX_BYTES``, a regular file only), summed per (group, src, dst,
transport, size class) so what is kept is as big as the job's links, not as its steps. A size,
time or bandwidth that is no finite number (``read/numbers.py``) leaves that entry out, and is
counted.
"""

import json
import math
import os
from typing import Any, Dict, Tuple

from ...layout import ASCEND_OUTPUT_DIR
from . import numbers
from .errors import CorruptFile
from .regular import read_regular

FILE = "communication_matrix.json"
MAX_BYTES = 256 << 20  # a 1,024-rank job's file per rank is a few MB
TOTAL = "Total Op Info"


def size_class(megabytes: float) -> int:
    """The decade of one transfer's bytes (6: 1-10 MB): bandwidth is compared within one."""
    return math.floor(math.log10(megabytes * 1e6)) if megabytes > 0 else -1


def read(path: str) -> Dict[str, Any]:
    """``rows``: [group, src, dst, transport, size class, bytes, transit µs, transfers] of the
    capture at ``path`` (its ``*_ascend_pt`` folder); ``unreadable``: entries left out;
    ``source``: None when there is no such file, ``error`` when it could not be read."""
    file = os.path.join(path, ASCEND_OUTPUT_DIR, FILE)
    if not os.path.lexists(file):
        return {"source": None, "rows": [], "unreadable": 0}
    try:
        data = json.loads(read_regular(file, MAX_BYTES))
    except (CorruptFile, OSError, ValueError, RecursionError) as exc:
        return {"source": FILE, "rows": [], "unreadable": 0,
                "error": f"{FILE} unreadable: {exc}"}
    sums: Dict[Tuple[str, int, int, str, int], list] = {}
    unreadable = 0
    for kinds in data.values() if isinstance(data, dict) else ():
        for ops in kinds.values() if isinstance(kinds, dict) else ():
            for name, links in ops.items() if isinstance(ops, dict) else ():
                if name == TOTAL or not isinstance(links, dict):
                    continue
                group = name.rsplit("@", 1)[1] if "@" in name else ""
                for pair, info in links.items():
                    found = _link(pair, info)
                    if found is None:
                        unreadable += 1
                        continue
                    src, dst, transport, megabytes, ms = found
                    key = (group, src, dst, transport, size_class(megabytes))
                    row = sums.setdefault(key, [0.0, 0.0, 0])
                    row[0] += megabytes * 1e6
                    row[1] += ms * 1000.0
                    row[2] += 1
    return {"source": FILE, "unreadable": unreadable,
            "rows": [[*key, *row] for key, row in sorted(sums.items())]}


def _link(pair, info):
    """(src, dst, transport, MB, ms) of one entry; None when any of them is unreadable."""
    ends = str(pair).split("-")
    if len(ends) != 2 or not all(e.isascii() and e.isdigit() for e in ends) \
            or not isinstance(info, dict):
        return None
    transport = info.get("Transport Type")
    megabytes = numbers.time_us(info.get("Transit Size(MB)"))
    ms = numbers.time_us(info.get("Transit Time(ms)"))
    if not isinstance(transport, str) or megabytes is None or ms is None or megabytes < 0 \
            or ms < 0:
        return None
    return int(ends[0]), int(ends[1]), transport[:16], megabytes, ms
