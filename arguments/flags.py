"""``add_profile_args``: every ``--profile*`` flag, added only where the host parser lacks it.

Megatron defines ``--profile``, ``--profile-step-start/-end`` and ``--profile-ranks``; MindSpeed
and MindSpeed-LLM define the level, export type, with-* and save-path flags. A flag the parser
already has is reused as the host defined it (its type, choices and default win): re-adding it
would raise argparse's "conflicting option string", and ``conflict_handler='resolve'`` would
silently replace the host's definition. Absent flags get upstream's names, types and defaults;
names (levels, metrics) are checked case-insensitively by ProfilerConfig rather than by argparse
``choices``, so ``Level1`` and ``level1`` both work.
"""

import argparse

from mindspeed_prof.config import kinds
from mindspeed_prof.config.profiler_config import KNOBS, flag_name
from mindspeed_prof.config.ranks import format_selection

GROUP_TITLE = "profiling (mindspeed_prof)"


def _argparse_kwargs(knob):
    spec = KNOBS[knob]
    kind = spec.metadata["kind"]
    shown = format_selection(spec.default) if kind is kinds.RANKS else None
    if knob == "profile_ranks":
        # An untyped --profile-ranks takes the host parser's default (host_defaults.py): saying
        # "0" alone was wrong inside Megatron-LM >= 0.17, where it means every rank.
        shown = (f"Megatron-LM's own where it defines the flag, [0] = rank 0 up to 0.16 and [] = "
                 f"every rank from 0.17 (show-config: --megatron-version); else {shown}")
    return kind.argparse_kwargs(flag_name(knob), spec.default, spec.metadata["help"],
                                spec.metadata.get("choices"), shown_default=shown)


def host_defines(parser, knob):
    return flag_name(knob) in parser._option_string_actions


def add_profile_args(parser):
    """Add the missing ``--profile*`` flags to ``parser`` and return it (an extra_args_provider)."""
    missing = [knob for knob in KNOBS if not host_defines(parser, knob)]
    if missing:
        group = parser.add_argument_group(title=GROUP_TITLE)
        for knob in missing:
            group.add_argument(flag_name(knob), dest=knob, **_argparse_kwargs(knob))
    return parser


def all_flags():
    return [flag_name(knob) for knob in KNOBS]


class _RecordFlag(argparse.Action):
    """Collects a profile flag and its values as typed, in order; validation comes later."""

    def __call__(self, parser, namespace, values, option_string=None):
        tokens = list(getattr(namespace, self.dest) or [])
        tokens.append(option_string)
        tokens.extend([values] if isinstance(values, str) else values)
        setattr(namespace, self.dest, tokens)


def add_recorded_profile_flags(parser, dest="profile_argv", title="profile flags",
                               description=None):
    """Declare every profile flag on a command-line tool (so its --help lists them) and collect
    the typed tokens under ``dest``, for ``parse_profile_flags`` to validate as training would."""
    group = parser.add_argument_group(title, description)
    for action in add_profile_args(argparse.ArgumentParser(add_help=False))._actions:
        nargs = 0 if action.nargs == 0 else action.nargs
        group.add_argument(*action.option_strings, action=_RecordFlag, dest=dest, nargs=nargs,
                           metavar=action.metavar if nargs != 0 else None, default=None,
                           help=(action.help or "").replace("%", "%%"))
    return parser
