"""Mirror of ``mindspeed.features_manager``: the feature classes, and MindSpeed's default list
set when this package is imported (as ``set_default_features_list()`` does)."""

from .feature import MindSpeedFeature
from .features_manager import MindSpeedFeaturesManager

__all__ = ["MindSpeedFeature", "MindSpeedFeaturesManager", "create_features_list"]


def create_features_list():
    from .megatron_basic import MegatronBasicFeature
    from .profile import ProfileFeature
    return [MegatronBasicFeature(), ProfileFeature()]


MindSpeedFeaturesManager.set_features_list(create_features_list())
