"""Framework-side CSVs: operator_details and the memory files (profile_memory=True)."""

from ._cann_export import write_csv
from ._run_data import RunData, ns_to_us, ns_to_us_str
from ._trace_view import call_stacks

OPERATOR_DETAILS_HEADERS = [
    "Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
    "Device Self Duration(us)", "Device Total Duration(us)", "Device Self Duration With AICore(us)",
    "Device Total Duration With AICore(us)"]
MEMORY_RECORD_HEADERS = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                         "Total Active(MB)", "Stream Ptr", "Device Type"]
OPERATOR_MEMORY_HEADERS = [
    "Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)", "Duration(us)",
    "Active Duration(us)", "Allocation Total Allocated(MB)", "Allocation Total Reserved(MB)",
    "Allocation Total Active(MB)", "Release Total Allocated(MB)", "Release Total Reserved(MB)",
    "Release Total Active(MB)", "Stream Ptr", "Device Type"]
NPU_MODULE_MEM_HEADERS = ["Device_id", "Component", "Timestamp(us)", "Total Reserved(MB)", "Device"]
_MB = 1024 * 1024
_RESERVE_BLOCK = 2 * _MB
_STREAM_PTR = 187651211083904


def _op_tree(data: RunData) -> tuple:
    """(parent cid per cid, children cids per cid) from time nesting within each thread."""
    parent, children = {}, {}
    for tid in {op["tid"] for op in data.ops}:
        stack = []
        for op in sorted((o for o in data.ops if o["tid"] == tid), key=lambda o: (o["ts_ns"], -o["dur_ns"])):
            while stack and stack[-1]["ts_ns"] + stack[-1]["dur_ns"] <= op["ts_ns"]:
                stack.pop()
            if stack:
                parent[op["cid"]] = stack[-1]["cid"]
                children.setdefault(stack[-1]["cid"], []).append(op)
            stack.append(op)
    return parent, children


def write_operator_details(data: RunData, output_dir: str) -> None:
    _, children = _op_tree(data)
    kernels_by_cid = {}
    for kernel in data.kernels:
        kernels_by_cid.setdefault(kernel["cid"], []).append(kernel)
    stacks = call_stacks(data) if data.config.with_stack else {}

    def device_time(cid, aicore_only, total):
        own = sum(k["dur_ns"] for k in kernels_by_cid.get(cid, [])
                  if not aicore_only or k["task_type"] == "AI_CORE")
        if total:
            own += sum(device_time(child["cid"], aicore_only, True) for child in children.get(cid, []))
        return own

    rows = []
    for op in data.ops:
        if op["name"].startswith("ProfilerStep#"):
            continue
        cid = op["cid"]
        shapes = ""
        if data.config.record_shapes and op.get("input_dims") is not None:
            shapes = ";\n".join(",".join(str(dim) for dim in dims) for dims in op["input_dims"])
        host_self = op["dur_ns"] - sum(child["dur_ns"] for child in children.get(cid, []))
        rows.append([op["name"], shapes, stacks.get(cid, ""), ns_to_us(max(host_self, 0)), ns_to_us(op["dur_ns"]),
                     ns_to_us(device_time(cid, False, False)), ns_to_us(device_time(cid, False, True)),
                     ns_to_us(device_time(cid, True, False)), ns_to_us(device_time(cid, True, True))])
    write_csv(output_dir, "operator_details.csv", OPERATOR_DETAILS_HEADERS, rows)


def _reserved(record: dict) -> float:
    # A caching NPU allocator always reserves at least what is allocated, in 2 MiB blocks.
    allocated = record["total_allocated"]
    blocks = -(-allocated // _RESERVE_BLOCK) * _RESERVE_BLOCK
    return max(record["total_reserved"], blocks) / _MB


def _allocating_op_names(data: RunData, records: list) -> dict:
    """id(record) -> name of the innermost op running on the record's thread at that moment."""
    names = {}
    for tid in {record["tid"] for record in records}:
        ops = sorted((op for op in data.ops if op["tid"] == tid), key=lambda op: (op["ts_ns"], -op["dur_ns"]))
        open_ops, next_op = [], 0
        for record in sorted((r for r in records if r["tid"] == tid), key=lambda r: r["ts_ns"]):
            while next_op < len(ops) and ops[next_op]["ts_ns"] <= record["ts_ns"]:
                open_ops.append(ops[next_op])
                next_op += 1
            open_ops = [op for op in open_ops if op["ts_ns"] + op["dur_ns"] >= record["ts_ns"]]
            names[id(record)] = open_ops[-1]["name"] if open_ops else "[unknown]"
    return names


def write_memory_views(data: RunData, output_dir: str) -> None:
    if not data.config.profile_memory or not data.memory:
        return
    device = f"NPU:{max(data.device_id, 0)}"
    records = sorted(data.memory, key=lambda r: r["ts_ns"])
    write_csv(output_dir, "memory_record.csv", MEMORY_RECORD_HEADERS, [
        ["PTA", ns_to_us_str(r["ts_ns"]), r["total_allocated"] / _MB, _reserved(r), r["total_allocated"] / _MB,
         _STREAM_PTR, device] for r in records])
    names = _allocating_op_names(data, [r for r in records if r["bytes"] > 0])
    open_blocks, rows = {}, []
    for record in records:
        if record["bytes"] > 0:
            open_blocks[record["addr"]] = record
            continue
        allocation = open_blocks.pop(record["addr"], None)
        if allocation is None:
            continue
        rows.append(_operator_memory_row(names[id(allocation)], allocation, record, device))
    rows += [_operator_memory_row(names[id(allocation)], allocation, None, device)
             for allocation in open_blocks.values()]
    write_csv(output_dir, "operator_memory.csv", OPERATOR_MEMORY_HEADERS, rows)
    first, last = records[0], records[-1]
    write_csv(output_dir, "npu_module_mem.csv", NPU_MODULE_MEM_HEADERS, [
        [max(data.device_id, 0), component, ns_to_us_str(r["ts_ns"]) + "\t", size, device]
        for r in (first, last) for component, size in (("SLOG", 0.0), ("APP", _reserved(r)), ("RUNTIME", 8.0))])


def _operator_memory_row(name: str, allocation: dict, release, device: str) -> list:
    """A block never freed inside the window keeps empty release cells, as in real files."""
    alloc_totals = [allocation["total_allocated"] / _MB, _reserved(allocation), allocation["total_allocated"] / _MB]
    if release is None:
        release_cells, release_totals = ["", "", "", ""], ["", "", ""]
    else:
        span = ns_to_us(release["ts_ns"] - allocation["ts_ns"])
        released_at = ns_to_us_str(release["ts_ns"])
        release_cells = [released_at, released_at, span, span]
        release_totals = [release["total_allocated"] / _MB, _reserved(release), release["total_allocated"] / _MB]
    return ([name, allocation["bytes"] / 1024, ns_to_us_str(allocation["ts_ns"])]
            + release_cells + alloc_totals + release_totals + [_STREAM_PTR, device])
