class MindSpeedFeature:
    def __init__(self, feature_name, optimization_level=2):
        self.feature_name = feature_name.strip().replace("-", "_")
        self.optimization_level = optimization_level

    def register_args(self, parser):
        pass

    def validate_args(self, args):
        pass

    def post_validate_args(self, args):
        pass

    def register_patches(self, patch_manager, args):
        pass
