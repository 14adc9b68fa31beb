"""The config of a process that builds an inference engine.

Megatron-LM's entry scripts parse their flags through ``initialize_megatron``; the argument
patches then build the config (``megatron_args.take_ownership``). A plain megatron-core script
(``DynamicInferenceEngine`` built by hand, ``MegatronLLM``, a static engine without
``megatron.training``) never does: its config comes from the command line it was started with,
the environment and the ``--profile-config`` YAML file, read here the first time an engine is
built. The script keeps its own options: only ours are read, the rest are left to it.
"""

import sys

from mindspeed_prof.errors import ConfigError
from mindspeed_prof.patches.state import state, usage_exit


def megatron_args():
    """Megatron's parsed args when Megatron parsed them in this process, else None (never
    imports megatron.training, nor asks ``get_args`` before it is set)."""
    global_vars = sys.modules.get("megatron.training.global_vars")
    return getattr(global_vars, "_GLOBAL_ARGS", None) if global_vars is not None else None


def engine_config(rank=0, world_size=1):
    """The process's ProfilerConfig (None when profiling was never asked for here)."""
    if state.config is not None or state.left_to_host:
        return state.config  # None when left to the host (Megatron under nsys)
    args = megatron_args()
    if args is not None:
        from mindspeed_prof.patches.megatron_args import take_ownership
        return take_ownership(args)
    if state.activated_by is None:
        return None  # nothing on the command line asked for profiling
    from mindspeed_prof.arguments import resolve_profile_flags
    from mindspeed_prof.recording.startup import preflight

    argv = state.argv if state.argv is not None else sys.argv[1:]
    try:
        resolved = resolve_profile_flags(argv, others_allowed=True)
        preflight(resolved.config, rank=rank, world_size=world_size)
    except ConfigError as exc:
        usage_exit(str(exc), rank=rank)
    state.config, state.window_given = resolved.config, resolved.window_given
    return state.config
