"""Mirror of ``mindspeed.megatron_adaptor`` as seen from outside: imported at the top of a training
script, it patches Megatron through the patch manager so that parse_args asks every feature for
its flags and validate_args lets every feature validate. With FAKE_MINDSPEED_REPATCH=1 it then
removes every patch and applies them again, as MindSpeed-LLM's adaptor does."""

import functools
import os

from mindspeed._log import event
from mindspeed.features_manager import MindSpeedFeaturesManager
from mindspeed.patch_utils import MindSpeedPatchesManager


def parse_args_wrapper(parse_args):
    @functools.wraps(parse_args)
    def wrapper(extra_args_provider=None, *args, **kwargs):
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
        result = validate_args(args, *rest, **kwargs)
        MindSpeedFeaturesManager.post_validate_features_args(args)
        return result
    return wrapper


def _apply():
    MindSpeedPatchesManager.register_patch("megatron.training.arguments.parse_args",
                                           parse_args_wrapper)
    MindSpeedPatchesManager.register_patch("megatron.training.arguments.validate_args",
                                           validate_args_wrapper)
    MindSpeedFeaturesManager.apply_features_patches(MindSpeedPatchesManager, None)


_apply()
if os.environ.get("FAKE_MINDSPEED_REPATCH") == "1":
    MindSpeedPatchesManager.remove_patches()
    _apply()
event("adaptor_applied")
