"""The torch_npu double (tests/fakes) as a pytest fixture: ``from helpers.npu import fake_npu``."""

import os
import sys

import pytest


@pytest.fixture
def fake_npu(monkeypatch):
    """torch_npu 2.7.1's double imported for one test, then unloaded (async parses joined)."""
    from fakes.loader import FAKES_DIR, load_fake_torch_npu, unload_fake_torch_npu

    monkeypatch.setenv("RANK", "0")  # torch_npu names profiler_info_{RANK}.json after it
    yield load_fake_torch_npu("2.7.1")
    sys.modules["torch_npu.profiler.analysis"].wait_for_async_parses(timeout=60)
    unload_fake_torch_npu()
    while FAKES_DIR in sys.path:
        sys.path.remove(FAKES_DIR)
    os.environ.pop("FAKE_TORCH_NPU_VERSION", None)
