"""mindspeed_prof as a MindSpeed feature: flags, validation and patches in MindSpeed's own terms.

When MindSpeed's features manager imports (in a process that asked for profiling), this feature
is appended to ``MindSpeedFeaturesManager.FEATURES_LIST``; again when MindSpeed-LLM's features
manager imports, since it replaces the whole list. MindSpeed then calls ``register_args`` from its
parse_args wrapper and ``post_validate_args`` after validation. Being last in the list matters:
MindSpeed's own profile feature defines ``--profile-level`` etc. first, and we reuse them.
The train/train_step patches are not this feature's: they need the validated config, and the
registry re-applies them after MindSpeed's ``remove_patches()``/``repatch()`` (it follows every
``apply_patches()``), which would otherwise keep only what features register.
"""

FEATURE_NAME = "mindspeed_prof"


def _feature_class(base):
    class MindSpeedProfFeature(base):
        def __init__(self):
            # optimization_level 0: always applied; the process already asked for profiling.
            super().__init__(FEATURE_NAME, optimization_level=0)

        def register_args(self, parser):
            from mindspeed_prof.arguments import add_profile_args
            add_profile_args(parser)

        def post_validate_args(self, args):
            from mindspeed_prof.patches.megatron_args import take_ownership
            take_ownership(args)

        def register_patches(self, patch_manager, args):
            # The loop patches depend on the validated config: take_ownership applies them, and
            # the registry puts them back after any remove/re-apply cycle.
            return None

    return MindSpeedProfFeature


def register_with_features_manager(features_module):
    manager = getattr(features_module, "MindSpeedFeaturesManager", None)
    base = getattr(features_module, "MindSpeedFeature", None)
    if base is None:
        try:
            from mindspeed.features_manager.feature import MindSpeedFeature as base
        except ImportError:
            return None
    features = getattr(manager, "FEATURES_LIST", None) if manager is not None else None
    if features is None:
        return None
    if any(getattr(f, "feature_name", None) == FEATURE_NAME for f in features):
        return None
    feature = _feature_class(base)()
    features.append(feature)
    return feature
