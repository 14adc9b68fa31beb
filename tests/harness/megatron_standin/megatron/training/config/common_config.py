"""``ProfilingConfig`` as Megatron-LM 0.17-0.19 declares it: names, types and defaults.

``profile_ranks`` defaults to ``[]``, which Megatron's loop reads as every rank
(``len(args.profile_ranks) == 0 or rank in args.profile_ranks``); up to 0.16 it was ``[0]``.
"""

from dataclasses import dataclass, field


@dataclass(kw_only=True)
class ProfilingConfig:
    """Configuration settings for profiling the training process."""

    use_nsys_profiler: bool = field(
        default=False, metadata={"argparse_meta": {"arg_names": ["--profile"], "dest": "profile"}})
    profile_step_start: int = 10
    profile_step_end: int = 12
    use_pytorch_profiler: bool = False
    pytorch_profiler_collect_shapes: bool = False
    pytorch_profiler_collect_callstack: bool = False
    pytorch_profiler_collect_chakra: bool = False
    profile_ranks: list[int] = field(default_factory=lambda: [])
    record_memory_history: bool = False
    memory_snapshot_path: str = "snapshot.pickle"
    record_shapes: bool = False
    nvtx_ranges: bool = False
