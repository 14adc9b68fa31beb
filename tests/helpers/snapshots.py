"""A torch_npu-shaped allocator snapshot for the readers' tests."""


def snapshot(name="step", filename="/work/train.py", device=0, size=1 << 20):
    """A torch_npu-shaped allocator snapshot: one allocation, still alive."""
    frames = [{"name": name, "filename": filename, "line": 7}]
    segment = {"device": device, "address": 0, "total_size": 2 << 20, "allocated_size": 0,
               "active_size": 0, "requested_size": 0, "stream": 0, "segment_pool_id": (0, 0),
               "segment_type": "large", "is_expandable": False, "frames": [],
               "blocks": [{"address": 0, "size": size, "requested_size": size,
                           "state": "active_allocated", "frames": frames}]}
    entry = {"action": "alloc", "addr": 0, "size": size, "stream": 0, "pool_id": (0, 0),
             "frames": frames}
    return {"segments": [segment], "device_traces": [[entry]]}
