"""Mirror of ``mindspeed.features_manager``: a feature list iterated at call time."""

from .feature import MindSpeedFeature


class MindSpeedFeaturesManager:
    # Built when this module is imported, as MindSpeed's create_features_list() does.
    FEATURES_LIST = []

    @classmethod
    def register_features_args(cls, parser):
        for feature in cls.FEATURES_LIST:
            feature.register_args(parser)

    @classmethod
    def post_validate_features_args(cls, args):
        for feature in cls.FEATURES_LIST:
            feature.post_validate_args(args)

    @classmethod
    def apply_features_patches(cls, patch_manager, args):
        for feature in cls.FEATURES_LIST:
            feature.register_patches(patch_manager, args)
        patch_manager.apply_patches()


__all__ = ["MindSpeedFeature", "MindSpeedFeaturesManager"]


def _default_features():
    from .profile import ProfileFeature
    return [ProfileFeature()]


MindSpeedFeaturesManager.FEATURES_LIST.extend(_default_features())
