"""Megatron's argument parsing: add our flags, then take ownership of profiling.

``parse_args`` is wrapped to chain the caller's ``extra_args_provider`` (Megatron 0.12-0.16 all
call ``parser = extra_args_provider(parser)`` before parsing) with ``add_profile_args``.
``validate_args`` is wrapped to build the ProfilerConfig once Megatron has filled in its derived
values (an untyped ``--profile-ranks`` keeps the host's default and meaning, see
arguments/host_defaults.py; Megatron's profiler options, see megatron_host_profiling.py), and to
switch the host's own profiling off: with ``args.profile = False`` Megatron's
nsys / ``--use-pytorch-profiler`` branches, MindSpeed's profile feature and MindSpeed-LLM's loop
profiler never start, so one profiler runs per process.
"""

import functools
import sys

from mindspeed_prof import log
from mindspeed_prof.arguments import add_profile_args, resolve_args
from mindspeed_prof.arguments.argv import ints_only_ranks_argv, rank_tokens
from mindspeed_prof.arguments.messages import with_fix
from mindspeed_prof.errors import ConfigError
from mindspeed_prof.recording.startup import preflight
from mindspeed_prof.patches import megatron_host_profiling as host_profiling
from mindspeed_prof.patches import hooks, sigterm
from mindspeed_prof.patches.megatron_memory import take_over_memory_history
from mindspeed_prof.patches.state import state, usage_exit
from mindspeed_prof.config.ranks import expand, global_ranks, parse_rank_tokens

PARSE_ARGS = "megatron.training.arguments.parse_args"
VALIDATE_ARGS = "megatron.training.arguments.validate_args"


def _host_parses_ranks_as_int(parser):
    action = parser._option_string_actions.get("--profile-ranks")
    return action is not None and action.type not in (None, str)


def _argv_for_int_ranks(argv):
    """Our rank grammar rewritten as the plain ints Megatron's ``type=int`` flag accepts."""
    tokens = rank_tokens(argv)
    if tokens is None or all(t.lstrip("-").isdigit() for t in tokens):
        return None
    try:
        selection = parse_rank_tokens(tokens)
    except ConfigError as exc:
        usage_exit(str(exc))
    return ints_only_ranks_argv(argv, list(expand(global_ranks(selection))))


def mindspeed_prof_parse_args_wrapper(parse_args):
    @functools.wraps(parse_args)
    def parse_args_with_profile_flags(*args, **kwargs):
        provider = kwargs.pop("extra_args_provider", args[0] if args else None)
        state.argv = list(sys.argv[1:])

        def provider_with_profile_flags(parser):
            if provider is not None:
                parser = provider(parser)
            _add_flags_when_parsing(parser)
            return parser

        return parse_args(provider_with_profile_flags, *args[1:], **kwargs)

    return parse_args_with_profile_flags


def _add_flags_when_parsing(parser):
    """Add our flags at the moment the parser parses, i.e. after every provider and MindSpeed
    feature has added its own: a flag MindSpeed adds after ours would be a conflicting option."""
    for name in ("parse_known_args", "parse_args"):
        original = getattr(parser, name)

        def parse_with_profile_flags(args=None, namespace=None, _original=original):
            add_profile_args(parser)
            typed = list(sys.argv[1:] if args is None else args)
            rewritten = _argv_for_int_ranks(typed) if _host_parses_ranks_as_int(parser) else None
            if rewritten is None:
                return _original(args, namespace)
            if args is not None:
                return _original(rewritten, namespace)
            saved = list(sys.argv)
            sys.argv[1:] = rewritten
            try:
                return _original(None, namespace)
            finally:
                sys.argv[:] = saved

        setattr(parser, name, parse_with_profile_flags)

    error = parser.error

    def error_with_fix(message):
        # argparse's words name the token, not the fix (Megatron defines --profile-step-start
        # as a plain int). The process ends here: the "chain not connected" note would be noise.
        state.usage_error = True
        error(with_fix(message, parser, sys.argv[1:], help_hint=f"`{parser.prog} --help`"))

    parser.error = error_with_fix


def mindspeed_prof_validate_args_wrapper(validate_args):
    @functools.wraps(validate_args)
    def validate_args_then_take_ownership(args, *rest, **kwargs):
        result = validate_args(args, *rest, **kwargs)
        take_ownership(args)
        return result

    return validate_args_then_take_ownership


def take_ownership(args):
    """Build the ProfilerConfig from Megatron's args and turn the host's profilers off."""
    if state.config is not None or state.left_to_host:
        return state.config  # already decided (MindSpeed's feature hook and ours both call this)
    rank = getattr(args, "rank", 0) or 0
    if (getattr(args, "profile", False) and not getattr(args, "use_pytorch_profiler", False)
            and host_profiling.under_nsys()):
        # The user runs Megatron under `nsys profile --capture-range=cudaProfilerApi`: the
        # capture they asked for is Megatron's own; taking --profile over would silently
        # replace it with a torch trace.
        state.left_to_host = "nsys"
        if rank == 0:
            log.warning(host_profiling.nsys_message(args), rank=rank)
        return None
    try:
        resolved = resolve_args(args, argv=state.argv if state.argv is not None else sys.argv[1:])
        config, notes = resolved.config, list(resolved.notes)
        if config.profile:
            config, taken = host_profiling.take_over_options(args, config)
            notes += taken
    except ConfigError as exc:
        usage_exit(str(exc), rank=rank, show=rank == 0)
    state.config, state.window_given = config, resolved.window_given
    if not config.profile:
        return config
    if getattr(args, "use_pytorch_profiler", False):
        usage_exit(host_profiling.use_pytorch_profiler_message(), rank=rank, show=rank == 0)
    state.config = config = take_over_memory_history(args, config, rank)
    try:
        preflight(config, rank=rank, world_size=int(getattr(args, "world_size", 1) or 1))
    except ConfigError as exc:
        usage_exit(str(exc), rank=rank)
    if rank == 0:
        for note in notes:  # which host defaults applied, and why (before the plan line)
            log.info(note, rank=rank)
    # The one documented write to args: the host's own profilers see profiling as off.
    args.profile = False
    hooks.install(hooks.OWNED_JOB_HOOKS)
    sigterm.install()
    return config
