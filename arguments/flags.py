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

from mindspeed_prof.config import KNOBS, describe_kind, flag_name
from mindspeed_prof.ranks import format_selection

GROUP_TITLE = "profiling (mindspeed_prof)"
_METAVARS = {"int": "N", "str": "DIR", "path": "FILE", "float?": "N", "ranks": "RANK",
             "list": "NAME", "steps": "A-B"}


def _typed(flag, convert, example):
    def parse(text):
        try:
            return convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {example}, got {text!r}; fix the value of {flag}") from None
    parse.__name__ = convert.__name__
    return parse


def _argparse_kwargs(knob):
    spec = KNOBS[knob]
    kind, flag, default = spec.metadata["kind"], flag_name(knob), spec.default
    help_text = spec.metadata["help"]
    choices = spec.metadata.get("choices")
    if kind == "bool":
        return {"action": "store_true", "help": help_text}
    kwargs = {"default": default, "metavar": _METAVARS.get(kind)}
    if kind == "int":
        kwargs["type"] = _typed(flag, int, "an integer such as 5")
    elif kind == "float?":
        kwargs["type"] = _typed(flag, float, "a number such as 10")
    elif kind in ("ranks", "list", "steps"):
        # The default stays the config's own tuple: an empty list is what a user typed (an
        # unset variable) and is refused, while () means "not given".
        kwargs.update(nargs="+", type=str, default=default)
    else:
        kwargs["type"] = str
    if choices:
        kwargs["metavar"] = "{" + ",".join(choices) + "}"
        if kind == "list":
            kwargs["metavar"] = "NAME"
    shown = format_selection(default) if kind == "ranks" else default
    kwargs["help"] = f"{help_text} (default: {shown}; expects {describe_kind(spec)})"
    return kwargs


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
