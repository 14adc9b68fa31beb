"""Backend choice: decided once per process from ``--profile-backend``."""

from ..errors import BackendUnavailable


def choose(config):
    """``"npu"`` or ``"torch"``. ``auto`` takes npu when torch_npu works, else torch."""
    wanted = config.profile_backend
    if wanted == "torch":
        return "torch", None
    from . import npu

    ok, detail = npu.usable()
    if ok:
        return "npu", detail
    if wanted == "npu":
        raise BackendUnavailable(detail if detail.startswith("--profile-backend")
                                 else f"--profile-backend npu: {detail}; use --profile-backend torch "
                                      f"or fix the torch_npu installation.")
    return "torch", detail


def backend_class(name):
    if name == "npu":
        from .npu import NpuBackend
        return NpuBackend
    from .torch_backend import TorchBackend
    return TorchBackend


def ignored_flags(name, config):
    """Flags set away from their default that backend ``name`` cannot honour."""
    if name == "torch":
        from .torch_backend import ignored_flags as torch_ignored
        return torch_ignored(config)
    return []
