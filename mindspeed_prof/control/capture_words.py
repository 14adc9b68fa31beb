"""The capture rules and their captures in words: start-up, show-config, check and summary
say them the same way (from the config, or from a manifest window's ``trigger``)."""

from typing import Any, Dict

from .anomaly import MEDIAN_OF, SLOW_STEP, STRAGGLER, STRAGGLER_CONFIRM, STRAGGLER_MIN_GAP_S


def describe(evidence: Dict[str, Any], unit_name: str = "iteration") -> str:
    """One line saying why a capture was taken, from its manifest evidence."""
    try:
        if evidence.get("rule") == SLOW_STEP:
            return (f"slow step: {unit_name} {evidence['unit']} took {evidence['seconds']:.3g} s, "
                    f"{evidence['ratio']:.2f}x the median {evidence['median_s']:.3g} s of the "
                    f"{evidence['median_of']} before it (factor {evidence['factor']:g})")
        if evidence.get("rule") == STRAGGLER:
            return (f"straggler: rank {evidence['straggler']} computed {evidence['seconds']:.3g} "
                    f"s per {unit_name}, {evidence['ratio']:.2f}x the other ranks' median "
                    f"{evidence['median_s']:.3g} s (factor {evidence['factor']:g}); reference "
                    f"rank {evidence['reference']}")
        if evidence.get("rule") == "request":
            return f"on request {evidence.get('request')} (mindspeed-prof trigger)"
    except (KeyError, TypeError, ValueError):
        pass
    return f"{evidence.get('rule', 'unknown rule')}"


def rules_in_words(config: Any, unit_name: str = "iteration", plural: str = "iterations",
                   chosen: str = "the selected ranks") -> str:
    """The capture rules of ``config`` as one sentence (start-up log, show-config)."""
    rules = []
    if config.profile_on_slow_step is not None:
        rules.append(f"a slow {unit_name} (over {config.profile_on_slow_step:g}x the median of "
                     f"the last {MEDIAN_OF}) captures {chosen}")
    if config.profile_on_straggler is not None:
        rules.append(f"a straggler (a rank whose compute time is over "
                     f"{config.profile_on_straggler:g}x the other ranks' median, and at least "
                     f"{STRAGGLER_MIN_GAP_S:g} s more per {unit_name}, at {STRAGGLER_CONFIRM} "
                     f"polls in a row) captures that rank and a median one")
    return (f"{' and '.join(rules)}, for {config.profile_capture_steps} {plural} from the next "
            f"poll (every {config.profile_trigger_poll} {plural}, judged after the first "
            f"{config.profile_capture_warmup}); at most {config.profile_max_captures} "
            f"captures, {config.profile_capture_cooldown} {plural} apart")
