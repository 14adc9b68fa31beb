"""Parsed arguments -> ProfilerConfig, with YAML and environment values merged in.

Precedence, highest first: the command line, ``MINDSPEED_PROF_*`` environment variables, the
``--profile-config`` file (or ``MINDSPEED_PROF_CONFIG``), then the defaults of whichever parser
defined the flag.
"""

import argparse
import os
import sys

from mindspeed_prof.config import KNOBS, ProfilerConfig, flag_name
from mindspeed_prof.errors import ConfigError

from . import argv as argv_tools
from .flags import add_profile_args
from .host_defaults import rank_default
from .messages import unrecognized
from .yaml_file import CONFIG_ENV, env_config_path, env_values, load_yaml


def config_from_args(args, argv=None, environ=None):
    """One ProfilerConfig (see ``config_and_notes``)."""
    return config_and_notes(args, argv, environ)[0]


def config_and_notes(args, argv=None, environ=None):
    """One ProfilerConfig from a parsed namespace (Megatron's, MindSpeed's or a plain parser's).

    ``argv`` is the command line the namespace came from (default ``sys.argv[1:]``); it tells which
    flags were typed, and carries the raw ``--profile-ranks`` tokens when the host parsed them as
    ints. Returns ``(config, notes)``: ``notes`` say which defaults of the host applied and why
    (an untyped ``--profile-ranks``, see host_defaults). Raises ConfigError naming the flag (or
    file key / variable) and the fix.
    """
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
    return build_config(values, origin), notes


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
    parser = add_profile_args(_Parser(prog="mindspeed-prof", add_help=False, allow_abbrev=False))
    args, unknown = parser.parse_known_args(list(argv))
    if unknown:
        raise ConfigError(unrecognized(parser, unknown, argv,
                                       "`mindspeed-prof show-config --help`"))
    if implied_profile:
        args.profile = True
    if host_rank_default is not None:
        args.profile_ranks = list(host_rank_default)
    config, found = config_and_notes(args, argv=list(argv), environ=environ)
    if notes is not None:
        notes.extend(found)
    return config
