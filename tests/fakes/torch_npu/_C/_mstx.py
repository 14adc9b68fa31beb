"""Stand-in for ``torch_npu._C._mstx``: host mstx marks and ranges, delivered to the captures
that collect them.

A capture (``profiler/_capture.py``) with mstx (or msprof_tx) on registers as a collector while
it records; a range that ends, or a mark, is handed to every collector whose domain filter
admits it (``mstx_domain_include`` wins over ``mstx_domain_exclude``, as in the wheels). Calls
made while nothing collects cost nothing and are kept nowhere, as natively. ``CALLS`` (fake only)
lists every call the process made, collected or not, for tests.
"""

import threading
import time

_lock = threading.Lock()
_next_id = 1
_open = {}        # range id -> (message, domain, start_ns, tid)
_collectors = []  # captures recording mstx now
CALLS = []        # ("range_start" | "range_end" | "mark", message, domain), in call order
ON_STREAM = []    # (message, stream id, device index) of every range started on a device stream


def add_collector(collector):
    with _lock:
        _collectors.append(collector)


def remove_collector(collector):
    with _lock:
        if collector in _collectors:
            _collectors.remove(collector)


def _deliver(event):
    for collector in list(_collectors):
        collector.take_mstx(event)


def _mark_on_host(message, domain):
    now = time.time_ns()
    with _lock:
        CALLS.append(("mark", message, domain))
        _deliver({"name": message, "domain": domain, "start_ns": now, "end_ns": now,
                  "tid": threading.get_native_id(), "kind": "mark"})


def _range_start_on_host(message, domain):
    global _next_id
    with _lock:
        CALLS.append(("range_start", message, domain))
        range_id, _next_id = _next_id, _next_id + 1
        _open[range_id] = (message, domain, time.time_ns(), threading.get_native_id())
        return range_id


def _range_start(message, stream_id, device_index, device_type, domain):
    with _lock:
        ON_STREAM.append((message, stream_id, device_index))
    return _range_start_on_host(message, domain)


def _range_end(range_id, domain):
    with _lock:
        opened = _open.pop(range_id, None)
        CALLS.append(("range_end", opened[0] if opened else None, domain))
        if opened is not None:
            message, opened_domain, start_ns, tid = opened
            _deliver({"name": message, "domain": opened_domain, "start_ns": start_ns,
                      "end_ns": time.time_ns(), "tid": tid, "kind": "range"})
