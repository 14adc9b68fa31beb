"""Mirror of ``mindspeed.features_manager.features_manager``: one class-level feature list that
every pass iterates at call time. ``set_features_list`` replaces its content in place
(``FEATURES_LIST[:] = ...``): MindSpeed sets its own list this way, and MindSpeed-LLM's features
manager replaces it with its own when imported."""

from mindspeed.patch_utils import MindSpeedPatchesManager


class MindSpeedFeaturesManager:
    FEATURES_LIST = []

    @classmethod
    def set_features_list(cls, features_list):
        cls.FEATURES_LIST[:] = features_list

    @classmethod
    def apply_features_pre_patches(cls, mindspeed_args):
        for feature in cls.FEATURES_LIST:
            if feature.is_need_apply(mindspeed_args):
                feature.pre_register_patches(MindSpeedPatchesManager, mindspeed_args)
        MindSpeedPatchesManager.apply_patches()

    @classmethod
    def apply_features_patches(cls, mindspeed_args):
        for feature in cls.FEATURES_LIST:
            if feature.is_need_apply(mindspeed_args):
                feature.register_patches(MindSpeedPatchesManager, mindspeed_args)
        MindSpeedPatchesManager.apply_patches()

    @classmethod
    def register_features_args(cls, parser):
        for feature in cls.FEATURES_LIST:
            feature.register_args(parser)

    @classmethod
    def pre_validate_features_args(cls, args):
        for feature in cls.FEATURES_LIST:
            feature.pre_validate_args(args)

    @classmethod
    def post_validate_features_args(cls, args):
        for feature in cls.FEATURES_LIST:
            feature.post_validate_args(args)

    @classmethod
    def validate_features_args(cls, args):
        for feature in cls.FEATURES_LIST:
            feature.validate_args(args)

    @classmethod
    def remove_patches(cls):
        MindSpeedPatchesManager.remove_patches()
