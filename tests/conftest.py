"""Shared test set-up: the tests/ folder is importable (harness, fakes), patches are undone after
each test, and the environment a test sees carries no profiling switches of the developer's."""

import os
import sys

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)


CURRENT_MEGATRON = (0, 17)


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: slow: torchrun jobs with real megatron-core, the benchmark smoke run")
    config.addinivalue_line(
        "markers", "current_megatron: needs megatron-core >= 0.17 (Python >= 3.12); skipped "
                   "elsewhere, run by scripts/test_current_megatron.sh")


def installed_megatron_core():
    """The installed megatron-core's (major, minor), or None (metadata only: no import)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return tuple(int(part) for part in version("megatron-core").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return None


def pytest_collection_modifyitems(config, items):
    core = installed_megatron_core()
    if core is not None and core >= CURRENT_MEGATRON:
        return
    shown = "none" if core is None else ".".join(map(str, core))
    skip = pytest.mark.skip(reason=f"needs megatron-core >= 0.17 (installed: {shown}); "
                                   f"the Python 3.12 leg, scripts/test_current_megatron.sh, "
                                   f"runs it")
    for item in items:
        if "current_megatron" in item.keywords:
            item.add_marker(skip)


# What makes torch_npu start a profiler or an allocator recorder of its own (mindspeed_prof/recording/armed.py)
TORCH_NPU_ARMING = ("PROF_CONFIG_PATH", "MSMONITOR_USE_DAEMON", "KINETO_USE_DAEMON",
                    "PROFILER_SAMPLECONFIG", "PROFILING_MODE", "OOM_SNAPSHOT_ENABLE")


@pytest.fixture(scope="session")
def _readers_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("readers_cache"))


@pytest.fixture(autouse=True)
def _clean_profiling_env(monkeypatch, _readers_cache):
    for name in list(os.environ):
        if name.startswith("MINDSPEED_PROF_") or name.startswith("FAKE_TORCH_NPU") \
                or name in TORCH_NPU_ARMING:
            monkeypatch.delenv(name, raising=False)
    # check/summary remember what they read (output/cache.py): in the session's temp folder,
    # never the developer's ~/.cache
    monkeypatch.setenv("MINDSPEED_PROF_CACHE", _readers_cache)
    yield


@pytest.fixture
def undo_patches():
    """Deactivate mindspeed_prof's patches after the test, whatever it did."""
    yield
    from mindspeed_prof.patches import deactivate
    deactivate()
