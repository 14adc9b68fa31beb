"""Mirror of MindSpeed's basic features (``megatron_basic``, ``requirements_basic``): level 0,
always applied. They own ``--optimization-level`` and the parse_args/validate_args patches
through which every feature adds and validates its flags, so a ``remove_patches()`` followed
by a re-apply puts those back (and nothing a feature did not register)."""

import functools

from .feature import MindSpeedFeature
from .._log import event


class MegatronBasicFeature(MindSpeedFeature):
    def __init__(self):
        super().__init__("megatron-basic", optimization_level=0)

    def register_args(self, parser):
        if "--optimization-level" not in parser._option_string_actions:
            parser.add_argument("--optimization-level", type=int, choices=[0, 1, 2], default=2)

    def register_patches(self, patch_manager, args):
        patch_manager.register_patch("megatron.training.arguments.parse_args", parse_args_wrapper)
        patch_manager.register_patch("megatron.training.arguments.validate_args",
                                     validate_args_wrapper)


def parse_args_wrapper(parse_args):
    @functools.wraps(parse_args)
    def wrapper(extra_args_provider=None, *args, **kwargs):
        from mindspeed.features_manager import MindSpeedFeaturesManager

        def provider(parser):
            if extra_args_provider is not None:
                parser = extra_args_provider(parser)
            MindSpeedFeaturesManager.register_features_args(parser)
            event("features_at_parse",
                  names=[f.feature_name for f in MindSpeedFeaturesManager.FEATURES_LIST])
            return parser
        return parse_args(provider, *args, **kwargs)
    return wrapper


def validate_args_wrapper(validate_args):
    @functools.wraps(validate_args)
    def wrapper(args, *rest, **kwargs):
        from mindspeed.features_manager import MindSpeedFeaturesManager

        MindSpeedFeaturesManager.pre_validate_features_args(args)
        result = validate_args(args, *rest, **kwargs)
        MindSpeedFeaturesManager.post_validate_features_args(args)
        MindSpeedFeaturesManager.validate_features_args(args)
        return result
    return wrapper
