"""A torch trace's step breakdown: computing, communication, overlap and free time per step.

As HTA's temporal breakdown does, from the trace's own events: within each ``ProfilerStep#N``,
the time covered by compute events, the time covered by communication (collective) events,
and the rest of the step, idle. Where both run at once, communication is overlapped; the part
of it with no compute beside it is exposed. The names and the identity are those of torch_npu's
step_trace_time.csv (msprof-analyze's), so both backends read alike: Computing +
Communication(Not Overlapped) + Free = the step; Overlapped = Communication - its exposed part.

Which events: the device's kernels when the trace has any (CUDA: ``kernel``, ``gpu_memcpy``,
``gpu_memset``; communication = NCCL/HCCL kernels), each step then spanning its
``ProfilerStep#N`` on the device (its ``gpu_user_annotation``) where the trace has one. Else
the CPU: compute = ``cpu_op`` events, communication = collective calls (``c10d::*``, ``gloo:*``,
``nccl:*``, ``hccl:*``, ``record_param_comms``) on any thread, including the backend's own
worker threads (gloo runs the collective there while the caller waits). An operator nested
inside a collective on its thread is that collective's work, not compute; an operator around a
collective on its thread (``_ReduceFromModelParallelRegion``, autograd's nodes) is compute only
outside it: while the collective runs, the operator waits in it. On the CPU basis Free is the
host's own time outside every operator: Python, data loading, a stall.
"""

from typing import Dict, Tuple

from ..deps import need

OTHER, CPU_COMPUTE, CPU_COMM, DEVICE_COMPUTE, DEVICE_COMM = range(5)
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
COLLECTIVE_PREFIXES = ("c10d::", "c10d_functional::", "_c10d_functional::", "gloo:", "nccl:",
                       "hccl:", "record_param_comms")
COLLECTIVE_KERNEL_MARKS = ("nccl", "hccl", "hcom")
BASIS = {False: "CPU operators in each ProfilerStep (communication: collective calls, "
                "c10d/gloo/nccl/hccl)",
         True: "device kernels in each ProfilerStep (communication: NCCL/HCCL kernels)"}


def kind_of(name: str, category: str) -> int:
    if category in DEVICE_CATEGORIES:
        lowered = name.lower()
        return DEVICE_COMM if any(m in lowered for m in COLLECTIVE_KERNEL_MARKS) \
            else DEVICE_COMPUTE
    if name.startswith(COLLECTIVE_PREFIXES):
        return CPU_COMM
    return CPU_COMPUTE if category == "cpu_op" else OTHER


def breakdown(threads, steps: Dict[int, Tuple[float, float]],
              device_steps: Dict[int, Tuple[float, float]]):
    """(basis, {N: {component: us}}) from each thread's ``ts``/``dur``/``kind`` arrays and the
    steps' (ts, dur) on the CPU and, where annotated, on the device."""
    np = need("numpy")
    parts: Dict[int, Tuple[list, list]] = {
        kind: ([], []) for kind in (CPU_COMPUTE, CPU_COMM, DEVICE_COMPUTE, DEVICE_COMM)}
    for thread in threads:
        kinds = np.frombuffer(thread.kind, dtype=np.int8) if len(thread.kind) else \
            np.zeros(0, np.int8)
        if not kinds.any():
            continue
        starts = np.frombuffer(thread.ts, dtype=np.float64)
        ends = starts + np.frombuffer(thread.dur, dtype=np.float64)
        comm_starts, comm_ends = _union(starts[kinds == CPU_COMM], ends[kinds == CPU_COMM])
        compute = kinds == CPU_COMPUTE
        if len(comm_starts):  # a collective's own operators are its work, not compute
            compute &= ~_inside(starts, ends, comm_starts, comm_ends)
        for kind, keep in ((CPU_COMPUTE, compute), (CPU_COMM, kinds == CPU_COMM),
                           (DEVICE_COMPUTE, kinds == DEVICE_COMPUTE),
                           (DEVICE_COMM, kinds == DEVICE_COMM)):
            if keep.any():
                lo, hi = starts[keep], ends[keep]
                if kind == CPU_COMPUTE and len(comm_starts):
                    # an operator around a collective on its own thread (Megatron's
                    # _ReduceFromModelParallelRegion) waits in it: that time is communication
                    merged_lo, merged_hi = _union(lo, hi)
                    lo, hi = _without(np, merged_lo, merged_hi, comm_starts, comm_ends)
                parts[kind][0].append(lo)
                parts[kind][1].append(hi)
    device = bool(parts[DEVICE_COMPUTE][0] or parts[DEVICE_COMM][0])
    compute_kind, comm_kind = (DEVICE_COMPUTE, DEVICE_COMM) if device else (CPU_COMPUTE, CPU_COMM)
    compute = _union(*_joined(np, parts[compute_kind]))
    comm = _union(*_joined(np, parts[comm_kind]))
    either = _union(np.concatenate([compute[0], comm[0]]), np.concatenate([compute[1], comm[1]]))
    numbers = list(steps)
    spans = [device_steps[n] if device and n in device_steps else steps[n] for n in numbers]
    los = np.array([ts for ts, _ in spans], dtype=np.float64)
    his = los + np.array([dur for _, dur in spans], dtype=np.float64)
    covered = [_covered(np, u, los, his) for u in (compute, comm, either)]
    result = {}
    for index, number in enumerate(numbers):
        dur = spans[index][1]
        busy, talking, any_ = (float(c[index]) for c in covered)
        overlapped = max(busy + talking - any_, 0.0)
        result[number] = {"Computing": busy,
                          "Communication(Not Overlapped)": talking - overlapped,
                          "Overlapped": overlapped, "Communication": talking,
                          "Free": max(dur - any_, 0.0), "step_time": dur}
    return BASIS[device], result


def _joined(np, pair):
    starts, ends = pair
    if not starts:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(starts), np.concatenate(ends)


def _union(starts, ends):
    """Sorted, disjoint intervals covering the same time as ``[starts, ends)``."""
    np = need("numpy")
    if not len(starts):
        return np.zeros(0), np.zeros(0)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    begins = np.flatnonzero(np.concatenate(([True], starts[1:] > reach[:-1])))
    last = np.concatenate((begins[1:] - 1, [len(starts) - 1]))
    return starts[begins], reach[last]


def _without(np, starts, ends, cut_starts, cut_ends):
    """The disjoint sorted intervals ``[starts, ends)`` less the disjoint ``cut`` ones."""
    points = np.concatenate([starts, ends, cut_starts, cut_ends])
    mine = np.concatenate([np.ones(len(starts)), -np.ones(len(ends)),
                           np.zeros(len(cut_starts) + len(cut_ends))])
    cut = np.concatenate([np.zeros(len(starts) + len(ends)), np.ones(len(cut_starts)),
                          -np.ones(len(cut_ends))])
    order = np.argsort(points, kind="stable")
    points, inside, cutting = points[order], np.cumsum(mine[order]), np.cumsum(cut[order])
    keep = (inside[:-1] > 0) & (cutting[:-1] <= 0) & (points[1:] > points[:-1])
    return points[:-1][keep], points[1:][keep]


def _inside(starts, ends, outer_starts, outer_ends):
    """Which ``[starts, ends)`` lie within one of the disjoint ``outer`` intervals."""
    np = need("numpy")
    at = np.searchsorted(outer_starts, starts, side="right") - 1
    held = at >= 0
    at = np.where(held, at, 0)
    return held & (outer_ends[at] >= ends)


def _covered(np, union, los, his):
    """Per window ``[los[i], his[i]]``, the time the disjoint sorted intervals ``union`` cover:
    every window at once (a window and an interval that meet, one row each; their clipped
    lengths summed per window), where a numpy call per step cost 0.9 s at 30 K steps."""
    starts, ends = union
    first = np.searchsorted(ends, los, side="right")
    counts = np.maximum(np.searchsorted(starts, his, side="left") - first, 0)
    total = int(counts.sum())
    if not total:
        return np.zeros(len(los))
    window = np.repeat(np.arange(len(los)), counts)
    # the intervals first[i], first[i] + 1, ... of each window, side by side
    at = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts) + first[window]
    clipped = np.minimum(ends[at], his[window]) - np.maximum(starts[at], los[window])
    return np.bincount(window, weights=np.clip(clipped, 0.0, None), minlength=len(los))
