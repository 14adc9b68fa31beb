"""Parsed arguments -> ProfilerConfig, with YAML and environment values merged in.

Precedence, highest first: the command line, ``MINDSPEED_PROF_*`` environment variables, the
``--profile-config`` file (or ``MINDSPEED_PROF_CONFIG``), then the defaults of whichever parser
defined the flag.
"""

import argparse
import os
import sys
from dataclasses import dataclass, field
from typing import FrozenSet, List

from mindspeed_prof.config.profiler_config import KNOBS, ProfilerConfig, flag_name
from mindspeed_prof.errors import ConfigError

from . import argv as argv_tools
from .flags import add_profile_args
from .host_defaults import rank_default, with_cpu_default
from .messages import unrecognized
from .yaml_file import CONFIG_ENV, env_config_path, env_values, load_yaml


# The knobs that ask for a window. A server started with none of them given (on the command
# line, in the environment or in the YAML file) plans no window and waits for an HTTP start:
# the parser's defaults (Megatron's 10/12) are not a window anyone asked for.
WINDOW_KNOBS = frozenset({"profile_step_start", "profile_step_end", "profile_steps",
                          "profile_every", "profile_trigger_file"})


@dataclass(frozen=True)
class Resolved:
    """The config, the knobs whose value someone gave (not the parser's default), and the
    sentences on the host's defaults that applied (``config_and_notes``)."""

    config: ProfilerConfig
    given: FrozenSet[str]
    notes: List[str] = field(default_factory=list)

    @property
    def window_given(self) -> bool:
        return bool(self.given & WINDOW_KNOBS)


def config_from_args(args, argv=None, environ=None):
    """One ProfilerConfig (see ``config_and_notes``)."""
    return resolve_args(args, argv, environ).config


def config_and_notes(args, argv=None, environ=None):
    """One ProfilerConfig from a parsed namespace (Megatron's, MindSpeed's or a plain parser's).

    ``argv`` is the command line the namespace came from (default ``sys.argv[1:]``); it tells which
    flags were typed, and carries the raw ``--profile-ranks`` tokens when the host parsed them as
    ints. Returns ``(config, notes)``: ``notes`` say which defaults of the host applied and why
    (an untyped ``--profile-ranks``, see host_defaults). Raises ConfigError naming the flag (or
    file key / variable) and the fix.
    """
    resolved = resolve_args(args, argv, environ)
    return resolved.config, resolved.notes


def resolve_args(args, argv=None, environ=None):
    """``config_and_notes``, and which knobs were given (``Resolved``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    environ = os.environ if environ is None else environ
    typed = argv_tools.explicit_knobs(argv)
    values = {knob: getattr(args, knob) for knob in KNOBS if hasattr(args, knob)}
    origin = {}
    layers = []
    path, flag = values.get("profile_config"), "--profile-config"
    if "profile_config" not in typed and env_config_path(environ):
        path, flag = env_config_path(environ), CONFIG_ENV
        values["profile_config"], origin["profile_config"] = path, "environment"
    if path and path.strip():  # a blank path is refused by ProfilerConfig, naming the flag
        layers.append((f"{flag} {path}", load_yaml(path, flag)))
    layers.append(("environment", env_values(environ)))
    for where, layer in layers:
        for key, value in layer.items():
            if key not in typed:
                values[key], origin[key] = value, where
    notes = []
    raw_ranks = argv_tools.rank_tokens(argv)
    if raw_ranks is not None:
        values["profile_ranks"] = raw_ranks
    elif "profile_ranks" not in origin and "profile_ranks" in values:
        # Not typed, not from the environment or YAML: the host parser's default, with the
        # host's meaning (Megatron >= 0.17's [] is every rank, not an empty list typed).
        values["profile_ranks"], note = rank_default(values["profile_ranks"])
        notes.append(note)
    if "profile_with_cpu" in values and "profile_with_cpu" not in typed \
            and "profile_with_cpu" not in origin:
        # A store_true flag's False is also what "not given" leaves: on (show-config says why),
        # but for the light capture (level_none with mstx), whose mstx ranges mark the steps.
        values["profile_with_cpu"] = with_cpu_default(values.get("profile_level"),
                                                      values.get("profile_mstx"))[0]
    _one_window_rule(values, origin, typed, rank=getattr(args, "rank", 0) or 0)
    return Resolved(build_config(values, origin), frozenset(typed | set(origin)), notes)


_START_END = ("profile_step_start", "profile_step_end")


def _layer(key, origin, typed):
    """Where a knob's value came from, highest first: 3 command line, 2 environment, 1 YAML,
    0 not given (the parser's default)."""
    if key in typed:
        return 3
    where = origin.get(key)
    return 0 if where is None else 2 if where == "environment" else 1


def _one_window_rule(values, origin, typed, rank=0):
    """``--profile-steps`` and ``--profile-step-start/-end`` both choose the window: the one
    given at the higher level wins (command line > environment > YAML), as every knob does; at
    the same level ``--profile-steps`` replaces start/end, as documented. Said, never silent."""
    steps = _layer("profile_steps", origin, typed)
    start_end = max(_layer(key, origin, typed) for key in _START_END)
    if not steps or not start_end or not values.get("profile_steps"):
        return
    names = {3: "the command line", 2: "the environment", 1: "the YAML file"}
    if start_end > steps:
        values["profile_steps"] = ()
        origin.pop("profile_steps", None)
        kept, dropped = "--profile-step-start/-end", "--profile-steps"
    else:
        kept, dropped = "--profile-steps", "--profile-step-start/-end"
    if rank == 0:
        from mindspeed_prof import log
        log.warning(f"{kept} from {names[max(steps, start_end)]} chooses the window; {dropped} "
                    f"from {names[min(steps, start_end)]} is ignored (the command line wins over "
                    f"the environment, which wins over the YAML file): give one of them.")


def build_config(values, origin):
    """ProfilerConfig from merged knob values; ``origin`` (key -> where its value came from)
    completes an error about that key. Used by training's parser and by RL role YAML."""
    # Not profile_ranks/profile_steps: a YAML [] must stay a list, which names nothing, not
    # become the canonical () that means every rank / no explicit window.
    for key in ("profile_host_sys", "profile_stages"):
        if isinstance(values.get(key), list):
            values[key] = tuple(values[key])
    try:
        return ProfilerConfig(**values)
    except ConfigError as exc:
        raise ConfigError(with_origin(str(exc), origin)) from None


def with_origin(message, origin):
    for key, where in origin.items():
        if message.startswith(flag_name(key) + " ") or f" {flag_name(key)} " in message:
            return f"{message} (value from {where}, key {key})"
    return message


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ConfigError(message)


def parse_profile_flags(argv, environ=None, implied_profile=False, host_rank_default=None,
                        notes=None):
    """ProfilerConfig from a list of ``--profile*`` flags alone (show-config, adapt-script).

    Uses the same flag definitions as training. Unknown options are refused, with the closest
    profile flag suggested for typos. ``host_rank_default`` (a list) stands in for the host
    parser's ``--profile-ranks`` default (host_defaults.megatron_default_for), and ``notes``
    (a list) receives the sentences on defaults that applied. Raises ConfigError; never exits.
    """
    resolved = resolve_profile_flags(argv, environ, implied_profile, host_rank_default)
    if notes is not None:
        notes.extend(resolved.notes)
    return resolved.config


def resolve_profile_flags(argv, environ=None, implied_profile=False, host_rank_default=None,
                          others_allowed=False):
    """``parse_profile_flags``, and which knobs were given (``Resolved``). ``others_allowed``:
    ``argv`` is a whole program's command line (a plain megatron-core script, which Megatron's
    parser never sees): its own options are left to it, only ours are read."""
    parser = add_profile_args(_Parser(prog="mindspeed-prof", add_help=False, allow_abbrev=False))
    args, unknown = parser.parse_known_args(list(argv))
    if unknown and not others_allowed:
        raise ConfigError(unrecognized(parser, unknown, argv,
                                       "`mindspeed-prof show-config --help`"))
    if implied_profile:
        args.profile = True
    if host_rank_default is not None:
        args.profile_ranks = list(host_rank_default)
    return resolve_args(args, argv=list(argv), environ=environ)
