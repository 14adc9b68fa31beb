"""Mirror of ``mindspeed.args_utils``: MindSpeed reads the command line itself before Megatron
parses it (every feature's flags, unknown ``--flags`` kept as attributes), so a feature can decide
whether it applies when the adaptor is imported."""

import argparse

_MINDSPEED_ARGS = None


def _parse_unknown(args, unknown):
    """``--flag v1 v2`` -> ``args['flag'] = [v1, v2]``; one value alone, none -> True."""
    key, values = None, None
    for token in unknown + ["--"]:
        if token.startswith("-"):
            if key:
                args[key] = True if values is None else values[0] if len(values) == 1 else values
            name, _, value = token.partition("=")
            key, values = name.lstrip("-").replace("-", "_"), [value] if value else None
        elif key:
            values = (values or []) + [token]
    return args


def get_mindspeed_args():
    global _MINDSPEED_ARGS
    if _MINDSPEED_ARGS is None:
        from mindspeed.features_manager import MindSpeedFeaturesManager

        parser = argparse.ArgumentParser(allow_abbrev=False)
        MindSpeedFeaturesManager.register_features_args(parser)
        known, unknown = parser.parse_known_args()
        _MINDSPEED_ARGS = argparse.Namespace(**_parse_unknown(vars(known), unknown))
    return _MINDSPEED_ARGS


def get_full_args():
    """Megatron's args once parsed, else MindSpeed's own reading of the command line."""
    try:
        from megatron.training.global_vars import get_args
        return get_args()
    except (ImportError, AssertionError):
        return get_mindspeed_args()
