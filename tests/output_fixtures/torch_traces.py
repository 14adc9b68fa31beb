"""Produce real torch chrome traces named as the torch backend names them (layout.py).

A tiny model runs under ``torch.profiler.profile`` with a schedule that records exactly the
window [start, end). ``step_num`` and ``current_action`` are set before ``start()`` so that
the ``ProfilerStep#N`` ids equal the training iterations, as the core's torch backend does.
"""

import os
import time
import warnings

from mindspeed_prof.layout import TORCH_TRACE_TEMPLATE


def torch_trace(directory, rank=0, start=5, end=8, record_steps=True):
    import torch
    from torch.profiler import ProfilerAction, ProfilerActivity, profile, schedule

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(str(directory),
                        TORCH_TRACE_TEMPLATE.format(rank=rank, time_ns=time.time_ns()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "won't be using warmup": the window starts cold
        active = schedule(wait=0, warmup=0, active=end - start, repeat=1)

    def window(step):
        return active(step - start) if step >= start else ProfilerAction.NONE

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    prof = profile(activities=[ProfilerActivity.CPU],
                   schedule=window if record_steps else None,
                   on_trace_ready=(lambda p: p.export_chrome_trace(path)) if record_steps else None)
    if record_steps:
        prof.step_num = start
        prof.current_action = window(start)
    prof.start()
    for _ in range(start, end):
        model(torch.randn(4, 16)).sum().backward()
        prof.step()
    prof.stop()
    if not record_steps:
        prof.export_chrome_trace(path)
    return path
