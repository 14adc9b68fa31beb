"""Every ``--profile*`` flag of mindspeed_prof, and the step from parsed args to ProfilerConfig."""

from .argv import explicit_knobs, profile_tokens_present, rank_tokens
from .flags import add_profile_args, add_recorded_profile_flags, all_flags, host_defines
from .resolve import (WINDOW_KNOBS, Resolved, config_and_notes, config_from_args,
                      parse_profile_flags, resolve_args, resolve_profile_flags)

__all__ = [
    "WINDOW_KNOBS",
    "Resolved",
    "add_profile_args",
    "add_recorded_profile_flags",
    "all_flags",
    "config_and_notes",
    "config_from_args",
    "explicit_knobs",
    "host_defines",
    "parse_profile_flags",
    "profile_tokens_present",
    "rank_tokens",
    "resolve_args",
    "resolve_profile_flags",
]
