"""What an untyped ``--profile-ranks`` means: the default of the parser that defined the flag.

Megatron-LM defines ``--profile-ranks`` itself, and its default changed meaning across releases:

    Megatron-LM <= 0.16   default [0]   rank 0 only
    Megatron-LM >= 0.17   default []    every rank (its loop reads ``len(profile_ranks) == 0 or
                                        rank in profile_ranks``)

A flag the user did not give keeps the host's default *with the host's meaning*, so the headline
flags alone profile what Megatron's own profiler would. A list the user *wrote* empty
(``--profile-ranks ''``, ``--profile-ranks $RANKS`` with ``RANKS`` unset, ``MINDSPEED_PROF_RANKS=``,
a YAML ``profile_ranks: []``) is still refused by ``ranks.parse_rank_tokens``: that is a mistake,
not a default. The two are told apart by where the value came from (typed on the command line,
environment, YAML), never by the value alone.
"""

from typing import Any, Optional, Tuple

from mindspeed_prof.config.ranks import format_selection

# Megatron-LM's own defaults, by the release that introduced them (ProfilingConfig.profile_ranks).
MEGATRON_OLD_DEFAULT = [0]       # core_v0.12 .. core_v0.16
MEGATRON_NEW_DEFAULT: list = []        # core_v0.17 ..
FIRST_EVERY_RANK_RELEASE = (0, 17)


def rank_default(host_value) -> Tuple[object, str]:
    """The selection an untyped ``--profile-ranks`` stands for, and the sentence saying why.

    ``host_value`` is what the parser left in the namespace: a list for Megatron's flag
    (``nargs='+', type=int``), the config's own tuple where mindspeed_prof added the flag.
    """
    if isinstance(host_value, tuple):
        return host_value, (f"--profile-ranks not given: mindspeed_prof's default, rank(s) "
                            f"{format_selection(host_value)}; inside Megatron-LM the host's "
                            f"default applies instead: [0] = rank 0 up to 0.16, [] = every "
                            f"rank from 0.17")
    values = list(host_value or [])
    if not values:
        # () is the config's canonical "every rank"; [] would be refused as naming no rank.
        return (), ("--profile-ranks not given: Megatron's own default [] applies, which "
                    "Megatron-LM >= 0.17 reads as every rank (as its own profiler does); give "
                    "--profile-ranks 0 to profile rank 0 only")
    if values == MEGATRON_OLD_DEFAULT:
        return values, ("--profile-ranks not given: Megatron's own default [0] applies, rank 0 "
                        "only (Megatron-LM <= 0.16); give --profile-ranks -1 for every rank")
    shown = " ".join(str(v) for v in values)
    return values, f"--profile-ranks not given: the host parser's default [{shown}] applies"


WITH_CPU_NOTE = ("--profile-with-cpu is on (not given): torch_npu marks each step "
                 "(ProfilerStep#N) from host activity, so without it a capture has no step ids "
                 "and a window reads as one step; turn it off with profile_with_cpu: false in "
                 "--profile-config or MINDSPEED_PROF_WITH_CPU=0")


LIGHT_NOTE = ("--profile-with-cpu is off (not given): --profile-level level_none with "
              "--profile-mstx is the light capture, whose mstx ranges mark the steps; give "
              "--profile-with-cpu to record host operators too")


def with_cpu_default(level: Any = None, mstx: Any = False) -> Tuple[bool, str]:
    """What an untyped ``--profile-with-cpu`` stands for, and why: on (MindSpeed-LLM's own flag,
    a store_true, defaults off; its False cannot be told from "not given"), but off for the
    light capture (``level_none`` with mstx), which records no host operator by design."""
    if mstx is True and str(level).lower() == "level_none":
        return False, LIGHT_NOTE
    return True, WITH_CPU_NOTE


def megatron_default_for(version: Optional[str]):
    """Megatron-LM's ``--profile-ranks`` default at ``version`` ('0.19.0'), or None if unknown.

    For show-config, which parses no Megatron command line: it emulates the host's parser."""
    if not version:
        return None
    try:
        release = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        return None
    return list(MEGATRON_NEW_DEFAULT if release >= FIRST_EVERY_RANK_RELEASE
                else MEGATRON_OLD_DEFAULT)
