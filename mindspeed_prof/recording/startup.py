"""Start-up checks a recorder runs before the first unit: the save path can be written, a rank
that will profile has a working backend, no profiler torch_npu arms from the environment would
run beside ours (``armed.py``), and an allocator to record when ``--profile-memory-*`` asks for
one. Raised as ConfigError (exit 2 in the host). ``--profile-memory-oom`` starts recording here,
as early as the device allows: when Megatron validates its arguments if the device is set up by
then, else when the recorder arms (training starts)."""

import os
from typing import Any

from . import armed
from .. import backends
from ..config import ranks
from ..backends import memory
from ..config.profiler_config import ProfilerConfig
from ..errors import ConfigError


def check_save_path(path: str, rank: int, backend_name: str) -> None:
    """ConfigError unless this rank can write ``path`` (and torch_npu would accept its name)."""
    reason = backends.kind(backend_name).path_refusal(os.path.abspath(path))
    if reason:
        raise ConfigError(f"--profile-save-path {path} {reason}; choose another directory.")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(f"--profile-save-path {path} is not writable on rank {rank}: it is a "
                          f"file, not a directory; choose a directory (it is created if "
                          f"missing).")
    probe = os.path.join(path, f".mindspeed_prof_write_test.{os.getpid()}")
    try:
        os.makedirs(path, exist_ok=True)
        with open(probe, "w") as handle:
            handle.write("ok")
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"--profile-save-path {path} is not writable on rank {rank} "
                          f"({exc.strerror or exc}); choose a writable directory.") from None


def refuse_armed_profilers(config: ProfilerConfig) -> None:
    """ConfigError naming each profiler torch_npu would start beside ours, with its fix."""
    found = armed.armed_profilers(config)
    if found:
        raise ConfigError(" ".join(item.message() for item in found))


def memory_device(config: ProfilerConfig, backend_name: str) -> Any:
    """The allocator ``--profile-memory-snapshot/-oom`` records (``npu``, ``cuda``), None when
    neither flag is on; ConfigError on a host that has neither device."""
    flags = memory.requested(config)
    if not flags:
        return None
    device = memory.device_for(backend_name)
    if device is None:
        raise ConfigError(f"{' and '.join(flags)} record{'s' if len(flags) == 1 else ''} the "
                          f"caching allocator of an NPU or a "
                          f"GPU, and this host has neither (torch_npu is not usable and "
                          f"torch.cuda.is_available() is False): run on an NPU or GPU host, or "
                          f"drop {' and '.join(flags)}.")
    return device


def check_rank(config: ProfilerConfig, rank: int, save_path: str, backend_name: str,
               early: bool = False) -> None:
    """Everything a rank that records checks before its first unit; then the OOM watch starts
    (idempotent: the earliest call wins; ``early``, before the host set its device up: only if
    the device is set up already). Raises ConfigError."""
    check_save_path(save_path, rank, backend_name)
    refuse_armed_profilers(config)
    device = memory_device(config, backend_name)
    if device is not None and config.profile_memory_oom \
            and not (early and not memory.device_ready(device)):
        try:
            memory.OOM.arm(config, rank=rank, save_path=save_path, device=device)
        except Exception as exc:  # noqa: BLE001 - a broken allocator API, said as the flag's
            raise ConfigError(f"--profile-memory-oom could not start recording the {device} "
                              f"allocator's history ({type(exc).__name__}: {exc}); drop "
                              f"--profile-memory-oom, or check the torch/torch_npu "
                              f"installation.") from None


def preflight(config: ProfilerConfig, *, rank: int, world_size: int) -> None:
    """The checks that need no work state, run as soon as the flags are parsed (before the
    model is built): the ranks exist, and a rank that will profile has a working backend, a
    writable save path, no rival profiler and, for ``--profile-memory-*``, a device allocator.
    Raises ConfigError. Rank selectors are resolved later, in arm()."""
    if not config.profile or ranks.needs_topology(config.profile_ranks):
        return
    selected = ranks.resolve(config.profile_ranks, world_size)
    if rank in selected or config.profile_trigger_file or config.profile_on_straggler:
        backend_name, _ = backends.choose(config)
        check_rank(config if rank in selected else config.replace(profile_memory_oom=False),
                   rank, config.profile_save_path, backend_name, early=True)
