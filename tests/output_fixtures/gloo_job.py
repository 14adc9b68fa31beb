"""A real 2-rank job with communication, under torch.profiler: each rank's chrome trace.

    python -m output_fixtures.gloo_job OUT_DIR      (tests/ on sys.path)

Two processes join a gloo group on 127.0.0.1 (a free port) and run 3 profiled steps. Each step
computes, all-reduces blocking (the caller waits: exposed communication), then starts an
all-reduce and computes until it has completed on gloo's worker thread (overlapped
communication). The traces are named as the torch backend names them (layout.py).
"""

import os
import socket
import sys
import time

STEPS = 3


def _rank(rank, world, port, out):
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    from mindspeed_prof.layout import TORCH_TRACE_TEMPLATE

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(rank)
    torch.set_num_threads(1)  # leave a core to gloo's thread: 2 ranks share 2 cores here
    x, grads = torch.randn(192, 192), torch.randn(1 << 18)
    path = os.path.join(out, TORCH_TRACE_TEMPLATE.format(rank=rank, time_ns=time.time_ns()))
    prof = profile(activities=[ProfilerActivity.CPU],
                   schedule=schedule(wait=0, warmup=1, active=STEPS, repeat=1),
                   on_trace_ready=lambda p: p.export_chrome_trace(path))
    prof.start()
    for _ in range(STEPS + 1):
        y = x @ x
        dist.all_reduce(grads)  # blocking: nothing computes meanwhile
        pending = dist.all_reduce(grads, async_op=True)
        for _ in range(2):
            y = y @ x
        while not pending.is_completed():  # computes for as long as gloo's thread reduces
            y = y @ x
        pending.wait()
        prof.step()
    prof.stop()
    dist.barrier()
    dist.destroy_process_group()


def main(out):
    import torch.multiprocessing as mp

    os.makedirs(out, exist_ok=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp.spawn(_rank, args=(2, port, out), nprocs=2)


if __name__ == "__main__":
    main(sys.argv[1])
