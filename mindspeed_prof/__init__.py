"""mindspeed_prof: profile Megatron-LM / MindSpeed training on Ascend NPUs from ``--profile*`` flags.

The core (this package minus ``arguments`` and ``patches``) never imports Megatron or MindSpeed;
only ``backends/npu.py`` imports torch_npu, lazily.
"""

from .version import __version__

# arguments/ and patches/ sit at the top of the repository (one place for every flag, one for every
# host touch point); mindspeed_prof/arguments and mindspeed_prof/patches are links to them, so a
# checkout, an editable and a regular install all import them as `mindspeed_prof.arguments` and
# `mindspeed_prof.patches` -- and mypy and import-graph tools follow them -- while nothing else at
# the repository's top (tests/, benchmarks/, scripts/) is importable as part of the package.


def __getattr__(name):
    # Lazy, so that `import mindspeed_prof` (done by the autoload hook) costs almost nothing.
    if name == "ProfilerConfig":
        from .config.profiler_config import ProfilerConfig
        return ProfilerConfig
    if name in ("ProfilerManager", "TrainingDriver"):
        from .drivers import training
        return getattr(training, name)
    if name == "profile":
        from .loop import profile
        return profile
    if name == "role_profiler":
        from .rl import role_profiler
        return role_profiler
    raise AttributeError(f"module 'mindspeed_prof' has no attribute {name!r}")


__all__ = ["ProfilerConfig", "ProfilerManager", "TrainingDriver", "profile", "role_profiler",
           "__version__"]
