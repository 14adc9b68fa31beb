"""The torch_npu double (tests/fakes) as a pytest fixture: ``from helpers.npu import fake_npu``."""

import os
import sys

import pytest


def fake_npu_fixture(version):
    """A ``fake_npu`` fixture for another torch_npu version's double (``fake_npu`` is 2.7.1)."""

    @pytest.fixture
    def fake_npu(monkeypatch):
        """torch_npu's double imported for one test, then unloaded (async parses joined)."""
        from fakes.loader import FAKES_DIR, load_fake_torch_npu, unload_fake_torch_npu

        monkeypatch.setenv("RANK", "0")  # torch_npu names profiler_info_{RANK}.json after it
        yield load_fake_torch_npu(version)
        sys.modules["torch_npu.profiler.analysis"].wait_for_async_parses(timeout=60)
        unload_fake_torch_npu()
        while FAKES_DIR in sys.path:
            sys.path.remove(FAKES_DIR)
        os.environ.pop("FAKE_TORCH_NPU_VERSION", None)

    return fake_npu


fake_npu = fake_npu_fixture("2.7.1")
