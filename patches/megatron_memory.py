"""Megatron's own allocator history under ``--profile``: taken over, one mechanism per process.

Megatron-LM (core_v0.12 ... core_v0.19) records the CUDA allocator with ``--record-memory-history``:
its model provider calls ``torch.cuda.memory._record_memory_history(True,
trace_alloc_max_entries=100000, trace_alloc_record_context=True)`` on every rank and attaches an
out-of-memory observer dumping ``oom_rank-{R}_{--memory-snapshot-path}``; ``training_log``
rewrites ``--memory-snapshot-path`` on the last rank every ``--log-interval``. Two recorders of
one history cut each other's (ours switches it off at each window's end), so with ``--profile``
ours does both jobs: ``--profile-memory-snapshot`` (a snapshot per profiled window, in its folder)
and ``--profile-memory-oom`` (history from the start of training, a snapshot on out-of-memory;
the model's build is not covered, as its device is not set up when the arguments are), with
Megatron's 100000 events unless ``--profile-memory-max-entries`` says otherwise, on the ranks
``--profile-ranks`` selects. ``args.record_memory_history = False`` then keeps Megatron's own off:
the second documented write to ``args`` (the first is ``args.profile = False``).
"""

from mindspeed_prof import log

DEFAULT_SNAPSHOT_PATH = "snapshot.pickle"  # Megatron's default --memory-snapshot-path


def take_over_memory_history(args, config, rank):
    """The config with Megatron's memory flags honoured through ours (``config`` unchanged
    when they are off or profiling is)."""
    if not (config.profile and getattr(args, "record_memory_history", False)):
        return config
    config = config.replace(profile_memory_snapshot=True, profile_memory_oom=True)
    args.record_memory_history = False
    if rank == 0:
        path = getattr(args, "memory_snapshot_path", DEFAULT_SNAPSHOT_PATH)
        unused = (f"; --memory-snapshot-path {path} is not written" if path
                  and path != DEFAULT_SNAPSHOT_PATH else "")
        log.info(f"--record-memory-history is recorded by mindspeed_prof (one recorder per "
                 f"process): --profile-memory-snapshot --profile-memory-oom, "
                 f"{config.profile_memory_max_entries} events, memory_snapshot_rank{{R}}.pickle "
                 f"in each window's folder and memory_oom_rank{{R}}.pickle on out-of-memory under "
                 f"{config.profile_save_path}{unused}")
    return config
