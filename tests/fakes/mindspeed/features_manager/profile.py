"""Mirror of MindSpeed's own profiling feature (``features_manager/functional/profile.py``): its
flags, and a ``train`` wrapper that starts MindSpeed's profiler when ``args.profile`` is true.
Here that profiler is torch's on the CPU, so running it beside mindspeed_prof's would fail exactly
as two real profilers on one thread do; the event log says whether it ever started."""

import functools

from .feature import MindSpeedFeature
from .._log import event


class ProfileFeature(MindSpeedFeature):
    def __init__(self):
        super().__init__("profile", optimization_level=2)

    def register_args(self, parser):
        group = parser.add_argument_group(title="profile")
        group.add_argument("--profile-level", type=str, default="level0",
                           choices=["level0", "level1", "level2"])
        group.add_argument("--profile-with-cpu", action="store_true")
        group.add_argument("--profile-with-stack", action="store_true")
        group.add_argument("--profile-with-memory", action="store_true")
        group.add_argument("--profile-record-shapes", action="store_true")
        group.add_argument("--profile-save-path", type=str, default="./profile_dir")

    def register_patches(self, patch_manager, args):
        patch_manager.register_patch("megatron.training.training.train", train_wrapper)


def train_wrapper(train):
    @functools.wraps(train)
    def wrapper(*args, **kwargs):
        from megatron.training import get_args
        import torch

        if not get_args().profile:
            return train(*args, **kwargs)
        event("own_profiler_started")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            return train(*args, **kwargs)

    return wrapper
