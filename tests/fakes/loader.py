"""Import the fake torch_npu as a chosen wheel, from any test.

    from loader import load_fake_torch_npu        # with tests/fakes on sys.path
    torch_npu = load_fake_torch_npu("2.6.0")

The version is fixed when torch_npu is imported, so switching wheels means dropping
every cached torch_npu* module and importing again. Objects created under the
previous version (profilers, configs) keep their old classes; do not mix them.
"""

import importlib
import os
import sys

FAKES_DIR = os.path.dirname(os.path.abspath(__file__))
VERSION_ENV = "FAKE_TORCH_NPU_VERSION"
SUPPORTED_VERSIONS = ("2.6.0", "2.7.1", "2.14.0")


def ensure_on_path() -> None:
    if FAKES_DIR not in sys.path:
        sys.path.insert(0, FAKES_DIR)


def unload_fake_torch_npu() -> None:
    for name in [name for name in sys.modules if name == "torch_npu" or name.startswith("torch_npu.")]:
        del sys.modules[name]


def load_fake_torch_npu(version: str = "2.7.1"):
    """Set FAKE_TORCH_NPU_VERSION (left set on purpose, so subprocesses see the same wheel)
    and return a freshly imported torch_npu."""
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"version {version!r} is not faked; use one of {', '.join(SUPPORTED_VERSIONS)}.")
    ensure_on_path()
    _wait_for_previous_async_parses()
    os.environ[VERSION_ENV] = version
    unload_fake_torch_npu()
    return importlib.import_module("torch_npu")


def _wait_for_previous_async_parses() -> None:
    # A background parse of the old module generation must not race its replacement.
    analysis = sys.modules.get("torch_npu.profiler.analysis")
    if analysis is not None:
        analysis.wait_for_async_parses(timeout=60)
