"""trace_view.json: a chrome-trace JSON array in torch_npu's process layout.

Processes: "Python" (real pid; torch ops and ProfilerStep#N as cpu_op), "CANN"
(Level1/2 only, which is also what the Level0 pruning of CANN events leaves),
"Ascend Hardware" (one thread per stream) and "Overlap Analysis". Timestamps are
strings of µs with 3 decimals; durations are floats.
"""

from .. import _constants as C
from ._run_data import RunData, ns_to_us, ns_to_us_str
from ._timeline import free_gaps, merged_intervals

CANN_PID = 43767502
HARDWARE_PID = 800
OVERLAP_PID = 4376751100


def _metadata(pid: int, name: str, labels: str, sort_index: int) -> list:
    return [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
        {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": labels}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort_index}},
    ]


def _thread(pid: int, tid: int, name: str) -> list:
    return [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}},
        {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}},
    ]


def call_stacks(data: RunData) -> dict:
    """cid -> "frame;\\nframe" of the python functions enclosing each op, innermost first."""
    stacks = {}
    for tid in {op["tid"] for op in data.ops}:
        frames = sorted((f for f in data.python_frames if f["tid"] == tid), key=lambda f: (f["ts_ns"], -f["dur_ns"]))
        ops = sorted((op for op in data.ops if op["tid"] == tid), key=lambda op: op["ts_ns"])
        open_frames, next_frame = [], 0
        for op in ops:
            while next_frame < len(frames) and frames[next_frame]["ts_ns"] <= op["ts_ns"]:
                open_frames.append(frames[next_frame])
                next_frame += 1
            op_end = op["ts_ns"] + op["dur_ns"]
            enclosing = [f for f in open_frames if f["ts_ns"] + f["dur_ns"] >= op_end]
            # Frames that closed before this op can never enclose a later one.
            open_frames = [f for f in open_frames if f["ts_ns"] + f["dur_ns"] >= op["ts_ns"]]
            if enclosing:
                stacks[op["cid"]] = ";\n".join(f["name"] for f in reversed(enclosing))
    return stacks


def _python_events(data: RunData) -> list:
    events = _metadata(data.pid, "Python", "CPU", 0)
    for tid in sorted({op["tid"] for op in data.ops}):
        events += _thread(data.pid, tid, f"Thread {tid}")
    stacks = call_stacks(data) if data.config.with_stack else {}
    for op in data.ops:
        args = {"Sequence number": op.get("seq", -1), "Fwd thread id": op.get("fwd_tid", 0)}
        if data.config.record_shapes and op.get("input_dims") is not None:
            args["Input Dims"] = op["input_dims"]
            args["Input type"] = op["input_types"]
        if op["cid"] in stacks:
            args["Call stack"] = stacks[op["cid"]]
        events.append({"ph": "X", "name": op["name"], "pid": data.pid, "tid": op["tid"],
                       "ts": ns_to_us_str(op["ts_ns"]), "dur": ns_to_us(op["dur_ns"]), "cat": "cpu_op",
                       "args": args})
    return events


def _mstx_events(data: RunData) -> list:
    """Host mstx ranges (X) and marks (i), on the thread that made them, in the Python process
    (its metadata too when no torch op was recorded, e.g. level_none without CPU activity)."""
    if not data.mstx:
        return []
    pid = data.pid or data.mstx_pid
    events = [] if data.ops else _metadata(pid, "Python", "CPU", 0)
    for tid in sorted({e["tid"] for e in data.mstx} - {op["tid"] for op in data.ops}):
        events += _thread(pid, tid, f"Thread {tid}")
    for event in data.mstx:
        entry = {"name": event["name"], "pid": pid, "tid": event["tid"],
                 "ts": ns_to_us_str(event["start_ns"]), "cat": "mstx",
                 "args": {"domain": event["domain"]}}
        if event["kind"] == "range":
            entry.update(ph="X", dur=ns_to_us(event["end_ns"] - event["start_ns"]))
        else:
            entry.update(ph="i", s="t")
        events.append(entry)
    return events


def _cann_events(data: RunData) -> list:
    if data.config.level not in (C.LEVEL1, C.LEVEL2) or not data.apis:
        return []
    events = _metadata(CANN_PID, "CANN", "CPU", 2)
    for tid in sorted({api["tid"] for api in data.apis}):
        events += _thread(CANN_PID, tid, f"Thread {tid}")
    prefix = {"acl": "AscendCL", "runtime": "Runtime"}
    for api in data.apis:
        events.append({"name": f"{prefix.get(api['level'], 'AscendCL')}@{api['name']}", "pid": CANN_PID,
                       "tid": api["tid"], "ts": ns_to_us_str(api["start_ns"]),
                       "dur": ns_to_us(api["end_ns"] - api["start_ns"]),
                       "args": {"Thread Id": api["tid"], "Mode": "ACL_OP", "level": api["level"],
                                "id": api["name"], "item_id": "0", "connection_id": api["cid"]},
                       "ph": "X"})
    return events


def _hardware_events(data: RunData) -> list:
    labels = f"NPU {data.device_id}" if data.device_id >= 0 else "NPU"
    events = _metadata(HARDWARE_PID, "Ascend Hardware", labels, 8)
    for stream in sorted({k["stream_id"] for k in data.kernels}):
        events += _thread(HARDWARE_PID, stream, f"Stream {stream}")
    op_by_cid = {op["cid"]: op for op in data.ops}
    for kernel in data.kernels:
        events.append({"name": kernel["name"], "pid": HARDWARE_PID, "tid": kernel["stream_id"],
                       "ts": ns_to_us_str(kernel["start_ns"]), "dur": ns_to_us(kernel["dur_ns"]),
                       "args": {"Model Id": 4294967295, "Task Type": kernel["task_type"],
                                "Stream Id": kernel["stream_id"], "Task Id": kernel["task_id"], "Batch Id": 0,
                                "Subtask Id": 4294967295, "connection_id": kernel["cid"]},
                       "ph": "X"})
        op = op_by_cid.get(kernel["cid"])
        if op is not None:
            flow_id = kernel["start_ns"]
            events.append({"ph": "s", "bp": "e", "name": "torch_to_npu", "id": flow_id, "pid": data.pid,
                           "tid": op["tid"], "ts": ns_to_us_str(op["ts_ns"]), "cat": "async_npu"})
            events.append({"ph": "f", "bp": "e", "name": "torch_to_npu", "id": flow_id, "pid": HARDWARE_PID,
                           "tid": kernel["stream_id"], "ts": ns_to_us_str(kernel["start_ns"]),
                           "cat": "async_npu"})
    return events


def _overlap_events(data: RunData) -> list:
    labels = f"NPU {data.device_id}" if data.device_id >= 0 else "NPU"
    events = _metadata(OVERLAP_PID, "Overlap Analysis", labels, 11)
    for tid, name in enumerate(("Computing", "Communication", "Communication(Not Overlapped)", "Free")):
        events += _thread(OVERLAP_PID, tid, name)
    busy = merged_intervals(data.kernels)
    for tid, name, spans in ((0, "Computing", busy), (3, "Free", free_gaps(busy))):
        for start, end in spans:
            events.append({"name": name, "pid": OVERLAP_PID, "tid": tid, "ts": ns_to_us_str(start),
                           "dur": ns_to_us(end - start), "ph": "X"})
    return events


def build_trace_events(data: RunData) -> list:
    events = []
    if data.ops:
        events += _python_events(data)
    events += _mstx_events(data)
    events += _cann_events(data)
    if data.kernels:
        events += _hardware_events(data) + _overlap_events(data)
    return events
