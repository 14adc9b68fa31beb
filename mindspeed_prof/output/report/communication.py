"""Communication per group and collective kind: count, bytes, time and bandwidth, where the
files say them.

- NPU text export: ``ASCEND_PROFILER_OUTPUT/communication.json`` (per step, per operator named
  ``hcom_<kind>__<id>@<group>``): elapsed time, and per transport the bytes moved and the time
  moving them. SDMA already holds HCCS and PCIE (msprof-analyze sums them into it), so the bytes
  are RDMA's + SDMA's where SDMA is given. Bandwidth is those bytes over those transit times,
  as msprof-analyze computes each transport's: the operator's own "Transit Time" is 0 in some
  releases' files while its transports moved hundreds of MB.
- torch trace: one kind of event per trace, the first present of: the device's NCCL/HCCL
  kernels, the backend's own collective annotations (``gloo:``/``nccl:``/``hccl:``, the
  collective running on its worker thread), the ``c10d::`` calls. Bytes and group come from the
  event's arguments where kineto writes them (``In msg nelems``, ``dtype``, ``Process Group
  Description``); a CPU gloo trace has none, so its bytes stay unknown, never guessed.

Each capture is read on its own (over several processes when big) and remembered in the cache
like summary's numbers.
"""

import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from ...layout import ASCEND_OUTPUT_DIR
from .. import cache, parallel
from ..read import jsonstream
from ..read.errors import CorruptFile

KIND = "report_communication"
NPU_FILE = "communication.json"
UNKNOWN_GROUP = "(not in the trace)"
DTYPE_BYTES = {"float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8,
               "float64": 8, "int": 4, "int32": 4, "long": 8, "int64": 8, "short": 2,
               "int16": 2, "byte": 1, "uint8": 1, "char": 1, "int8": 1, "bool": 1,
               "float8_e4m3fn": 1, "float8_e5m2": 1}
KERNEL_MARKS = ("nccl", "hccl", "hcom")
ANNOTATION_PREFIXES = ("gloo:", "nccl:", "hccl:")
CALL_PREFIXES = ("c10d::", "c10d_functional::", "_c10d_functional::")
SOURCES = ("device kernels", "backend annotations", "c10d calls")
_KIND_ALIASES = {"allgatherbase": "allgather", "allgatherintotensor": "allgather",
                 "allgatherintotensorcoalesced": "allgather", "reducescatterbase":
                 "reducescatter", "reducescattertensor": "reducescatter",
                 "reducescattertensorcoalesced": "reducescatter", "sendrecv": "sendrecv"}


def kind_name(raw: str) -> str:
    """One name per collective whatever wrote it: ``c10d::allreduce_``, ``gloo:all_reduce``,
    ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` and ``hcom_allReduce_`` are all ``allreduce``."""
    text = raw
    for prefix in (*CALL_PREFIXES, *ANNOTATION_PREFIXES, "hcom_"):
        if text.startswith(prefix):
            text = text[len(prefix):]
    lowered = text.lower()
    if lowered.startswith(("nccldevkernel_", "ncclkernel_")):
        text = text.split("_", 2)[1] if "_" in text else text
    letters = re.sub(r"[^a-z]", "", text.split("__")[0].lower())
    return _KIND_ALIASES.get(letters, letters or raw)


def _row():
    return {"count": 0, "bytes": None, "time_us": 0.0, "moved": 0.0, "moving_us": 0.0}


def _add(rows, group, kind, count, nbytes, time_us, moved=None, moving_us=None):
    """``moved`` bytes in ``moving_us`` give the bandwidth; by default the bytes over the time."""
    row = rows.setdefault((group, kind), _row())
    row["count"] += count
    row["time_us"] += time_us
    if nbytes is not None:
        row["bytes"] = (row["bytes"] or 0) + nbytes
        moved, moving_us = (nbytes, time_us) if moved is None else (moved, moving_us)
        if moving_us:
            row["moved"] += moved
            row["moving_us"] += moving_us


def _npu(path: str) -> Dict[str, Any]:
    """communication.json of one capture (steps -> collective/p2p -> operator -> info)."""
    file = os.path.join(path, ASCEND_OUTPUT_DIR, NPU_FILE)
    if not os.path.isfile(file):
        return {"source": None, "rows": []}
    try:
        with open(file, "rb") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        return {"source": NPU_FILE, "rows": [], "error": f"{NPU_FILE} unreadable: {exc}"}
    rows: Dict[Tuple[str, str], Dict[str, Any]] = {}
    for step in data.values() if isinstance(data, dict) else ():
        for ops in step.values() if isinstance(step, dict) else ():
            for name, info in ops.items() if isinstance(ops, dict) else ():
                if name == "Total Op Info" or not isinstance(info, dict):
                    continue
                times = info.get("Communication Time Info") or {}
                links = info.get("Communication Bandwidth Info") or {}
                group = name.rsplit("@", 1)[1] if "@" in name else UNKNOWN_GROUP
                links = {k: v for k, v in links.items() if isinstance(v, dict)}
                if "SDMA" in links:  # SDMA = HCCS + PCIE: counted once
                    links = {k: v for k, v in links.items() if k in ("RDMA", "SDMA")}
                megabytes = sum(_num(v.get("Transit Size(MB)")) for v in links.values())
                moving = sum(_num(v.get("Transit Time(ms)")) for v in links.values()
                             if _num(v.get("Transit Size(MB)")))
                _add(rows, group, kind_name(name), 1, megabytes * 1e6,
                     _num(times.get("Elapse Time(ms)")) * 1000.0,
                     megabytes * 1e6 if moving else 0.0, moving * 1000.0)
    return {"source": NPU_FILE, "rows": _listed(rows)}


def _num(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else 0.0


def _tier(event) -> Optional[int]:
    name = event.get("name")
    if not isinstance(name, str):
        return None
    category = str(event.get("cat", ""))
    if category == "kernel" and any(m in name.lower() for m in KERNEL_MARKS):
        return 0
    if name.startswith(ANNOTATION_PREFIXES):
        return 1
    if name.startswith(CALL_PREFIXES) and category == "cpu_op":
        return 2
    return None


def torch_communication(path: str) -> Dict[str, Any]:
    """The collectives of one torch trace (see the module docstring); ``CorruptFile`` when the
    trace is not whole."""
    found: List[Dict[tuple, Dict[str, Any]]] = [{}, {}, {}]
    for batch in jsonstream.iter_event_batches(path):
        for event in batch:
            if not isinstance(event, dict) or event.get("ph") != "X":
                continue
            tier = _tier(event)
            if tier is None:
                continue
            args = event.get("args")
            if not isinstance(args, dict):
                args = {}
            raw = args.get("Collective name") or event["name"]
            group = args.get("Process Group Description") or args.get("Process Group Name") \
                or args.get("Process Group Ranks")
            nbytes = None
            nelems, dtype = args.get("In msg nelems"), str(args.get("dtype", "")).lower()
            if isinstance(nelems, (int, float)) and dtype in DTYPE_BYTES:
                nbytes = float(nelems) * DTYPE_BYTES[dtype]
            _add(found[tier], str(group) if group else UNKNOWN_GROUP, kind_name(str(raw)), 1,
                 nbytes, _num(event.get("dur")))
    for tier, rows in enumerate(found):
        if rows:
            return {"source": SOURCES[tier], "rows": _listed(rows)}
    return {"source": None, "rows": []}


def _listed(rows):
    return [[group, kind, row] for (group, kind), row in sorted(rows.items())]


def _from_cache(hit):
    """A cache entry back; one of another shape raises KeyError (a miss: read again)."""
    rows = [[str(group), str(kind), {k: row[k] for k in _row()}]
            for group, kind, row in hit["rows"]]
    return {"source": hit["source"], "rows": rows}


def _remembered_torch(path):
    try:
        return cache.remembered(path, KIND, torch_communication, lambda r: r, _from_cache,
                                CorruptFile)
    except (CorruptFile, OSError, ValueError, RecursionError, EOFError) as exc:
        return {"source": None, "rows": [], "error": str(exc)}


def read_one(backend: str, path: str) -> Dict[str, Any]:
    return _npu(path) if backend == "npu" else _remembered_torch(path)


def communication(runs, layout=None) -> Dict[str, Any]:
    """Over the captures ``runs`` (discover's, with a rank): rows per (group, kind) summed over
    ranks, and per rank the same rows' time (for the slowest rank of each group). A group is
    named by the layout (``output/waits/layout.py``: ``dp0``, ``tp3``, ``world``) from the
    ranks whose files name it, never by its hash id (kept as ``raw_group``)."""
    calls = [(r.backend, r.path) for r in runs]
    sizes = [_size(r) for r in runs]
    results = parallel.run(read_one, calls, parallel.workers_for(sum(sizes), len(calls)))
    total: Dict[Tuple[str, str], Dict[str, Any]] = {}
    ranks: Dict[Tuple[str, str], set] = {}
    sources, notes = set(), []
    without = 0
    for run, result in zip(runs, results):
        if result.get("error"):
            notes.append(f"{run.rel}: {result['error']}")
        elif run.backend == "npu" and result.get("source") is None:
            without += 1
        if result.get("source"):
            sources.add(result["source"])
        for group, kind, row in result["rows"]:
            _add(total, group, kind, row["count"], row["bytes"], row["time_us"],
                 row["moved"], row["moving_us"])
            ranks.setdefault((group, kind), set()).add(run.rank)
    members: Dict[str, set] = {}
    for (group, _), found in ranks.items():
        members.setdefault(group, set()).update(r for r in found if r is not None)
    rows = []
    for (group, kind), row in sorted(total.items(), key=lambda kv: -kv[1]["time_us"]):
        named = group if group == UNKNOWN_GROUP or layout is None or not layout.known \
            or not members[group] else layout.group_name(members[group])
        rows.append({"group": named, "raw_group": group, "kind": kind,
                     "ranks": len(ranks[(group, kind)]),
                     "count": row["count"], "bytes": row["bytes"], "time_us": row["time_us"],
                     "bandwidth_gb_s": (row["moved"] / (row["moving_us"] * 1e3)
                                        if row["moving_us"] else None)})
    if without:
        notes.append(f"{without} NPU capture(s) without ASCEND_PROFILER_OUTPUT/{NPU_FILE} "
                      f"(torch_npu writes it at --profile-level level1 or level2, text "
                      f"export): no communication from them")
    return {"sources": sorted(sources), "rows": rows, "notes": notes}


def _size(run):
    if run.backend == "npu":
        file = os.path.join(run.path, ASCEND_OUTPUT_DIR, NPU_FILE)
        return os.path.getsize(file) if os.path.isfile(file) else 0
    if cache.worth_caching(run.path) and cache.load(run.path, KIND) is not None:
        return 0
    try:
        return os.path.getsize(run.path)
    except OSError:
        return 0
