"""Mirror of ``mindspeed.megatron_adaptor``: imported at the top of a training script, it applies
every feature's pre-patches and patches (MindSpeed's basic feature patches parse_args and
validate_args so that every feature adds and validates its flags). ``repatch(args)`` is what
features that re-apply patches after argument parsing call: ``remove_patches()`` (every wrapper
forgotten), then both passes again with the full args."""

from mindspeed._log import event
from mindspeed.args_utils import get_full_args, get_mindspeed_args
from mindspeed.features_manager import MindSpeedFeaturesManager


def patch_features():
    mindspeed_args = get_mindspeed_args()
    MindSpeedFeaturesManager.apply_features_pre_patches(mindspeed_args)
    MindSpeedFeaturesManager.apply_features_patches(mindspeed_args)


def repatch(args):
    MindSpeedFeaturesManager.remove_patches()
    full_args = get_full_args()
    for key, value in args.items():
        setattr(full_args, key, value)
    MindSpeedFeaturesManager.apply_features_pre_patches(full_args)
    MindSpeedFeaturesManager.apply_features_patches(full_args)
    event("repatched")


patch_features()
event("adaptor_applied")
