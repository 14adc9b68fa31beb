"""Device-time arithmetic shared by trace_view.json and step_trace_time.csv."""


def merged_intervals(kernels: list) -> list:
    """Union of kernel busy time as sorted, non-overlapping [start, end) ns intervals."""
    spans = sorted((k["start_ns"], k["start_ns"] + k["dur_ns"]) for k in kernels)
    merged = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [tuple(span) for span in merged]


def free_gaps(busy: list) -> list:
    return [(busy[i][1], busy[i + 1][0]) for i in range(len(busy) - 1) if busy[i + 1][0] > busy[i][1]]


def step_breakdown(kernels: list, step_start=None) -> dict:
    """µs figures of one step row; communication is always zero on a single fake device."""
    busy = merged_intervals(kernels)
    first, last = busy[0][0], busy[-1][1]
    computing = sum(end - start for start, end in busy)
    stage = last - first
    return {
        "computing": computing / 1000,
        "free": (stage - computing) / 1000,
        "stage": stage / 1000,
        "preparing": max(first - step_start, 0) / 1000 if step_start is not None else 0.0,
    }
