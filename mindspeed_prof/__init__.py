"""mindspeed_prof: profile Megatron-LM / MindSpeed training on Ascend NPUs from ``--profile*`` flags.

The core (this package minus ``arguments`` and ``patches``) never imports Megatron or MindSpeed;
only ``backends/npu.py`` imports torch_npu, lazily.
"""

import os

from .version import __version__

# In a source checkout, arguments/ and patches/ sit beside this package (setup.py maps them into
# it on install). Extending __path__ makes `mindspeed_prof.arguments` import the same way from a
# checkout as from site-packages.
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_CHECKOUT, "setup.py")) and os.path.isdir(
        os.path.join(_CHECKOUT, "patches")):
    __path__.append(_CHECKOUT)  # noqa: F821 - __path__ is defined for packages


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
