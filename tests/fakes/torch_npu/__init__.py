"""Test double of Huawei's torch_npu: just enough of the package for the profiler path.

Never installed; tests put tests/fakes on sys.path. The impersonated wheel is chosen
by FAKE_TORCH_NPU_VERSION when this package is first imported (see _version.py).
Importing it leaves torch untouched: no torch.npu attribute, no backend registration,
no transfer_to_npu patching.
"""

from torch_npu import _faults, _version

if _faults.is_armed("import"):
    # What a real wheel raises on a machine without the CANN toolkit.
    raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")

__version__ = _version.__version__

import torch  # noqa: E402,F401  the real wheel imports torch first as well

from torch_npu import _C, npu, profiler  # noqa: E402,F401

__all__ = ["npu", "profiler"]
