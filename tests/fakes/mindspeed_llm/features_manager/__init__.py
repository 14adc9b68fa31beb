"""Mirror of ``mindspeed_llm.features_manager``: on import it replaces MindSpeed's whole feature
list with MindSpeed-LLM's (``set_features_list`` assigns ``FEATURES_LIST[:]``), dropping anything
that was appended to MindSpeed's list before."""

from mindspeed.features_manager import MindSpeedFeature, MindSpeedFeaturesManager
from mindspeed.features_manager.megatron_basic import MegatronBasicFeature


class TrainingFeature(MindSpeedFeature):
    """MindSpeed-LLM's training basics: its own ``train`` replaces Megatron's."""

    def __init__(self):
        super().__init__("training", optimization_level=0)

    def register_patches(self, patch_manager, args):
        from mindspeed_llm.training.training import train
        patch_manager.register_patch("megatron.training.training.train", train)


class ProfilingFeature(MindSpeedFeature):
    """MindSpeed-LLM's profiling flags (its profiler lives in its train); no patches."""

    def __init__(self):
        super().__init__("profiling", optimization_level=0)

    def register_args(self, parser):
        group = parser.add_argument_group(title=self.feature_name)
        group.add_argument("--profile-export-type", type=str, default="text",
                           choices=["text", "db"])
        group.add_argument("--profile-level", type=str, default="level0",
                           choices=["level_none", "level0", "level1", "level2"])
        group.add_argument("--profile-data-simplification", action="store_true")
        group.add_argument("--profile-with-stack", action="store_true")
        group.add_argument("--profile-with-memory", action="store_true")
        group.add_argument("--profile-record-shapes", action="store_true")
        group.add_argument("--profile-with-cpu", action="store_true")
        group.add_argument("--profile-save-path", type=str, default="./profile_dir")


def create_features_list():
    return [MegatronBasicFeature(), TrainingFeature(), ProfilingFeature()]


MindSpeedFeaturesManager.set_features_list(create_features_list())
