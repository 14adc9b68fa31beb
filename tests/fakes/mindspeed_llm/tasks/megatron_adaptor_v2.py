"""Mirror of ``mindspeed_llm.tasks.megatron_adaptor_v2``: ``FeatureAdaptor.execute()`` at import
removes every patch first, reads the command line through MindSpeed-LLM's features (importing its
features manager, which replaces MindSpeed's list), then applies pre-patches and patches.
``repatch(config)`` does the same cycle again."""

from mindspeed._log import event
from mindspeed.features_manager.features_manager import MindSpeedFeaturesManager


def _llm_args():
    import mindspeed_llm.features_manager  # noqa: F401  (sets the feature list, as on import)
    from mindspeed.args_utils import get_mindspeed_args
    return get_mindspeed_args()


def repatch(config):
    MindSpeedFeaturesManager.remove_patches()
    args = _llm_args()
    for key, value in config.items():
        setattr(args, key, value)
    MindSpeedFeaturesManager.apply_features_pre_patches(args)
    MindSpeedFeaturesManager.apply_features_patches(args)


def execute():  # the real one is repatch() without the config
    repatch({})


execute()
event("llm_adaptor_applied")
