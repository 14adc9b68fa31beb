"""Start-up checks a recorder runs before the first unit: the save path can be written, and a
rank that will profile has a working backend. Raised as ConfigError (exit 2 in the host)."""

import os

from . import backends, ranks
from .config import ProfilerConfig
from .errors import ConfigError


def check_save_path(path: str, rank: int, backend_name: str) -> None:
    """ConfigError unless this rank can write ``path`` (and torch_npu would accept its name)."""
    if backend_name == "npu":
        from .backends.npu_options import unsupported_path_reason
        reason = unsupported_path_reason(os.path.abspath(path))
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


def preflight(config: ProfilerConfig, *, rank: int, world_size: int) -> None:
    """The checks that need no work state, run as soon as the flags are parsed (before the
    model is built): the ranks exist, and a rank that will profile has a working backend and a
    writable save path. Raises ConfigError. Rank selectors are resolved later, in arm()."""
    if not config.profile or ranks.needs_topology(config.profile_ranks):
        return
    selected = ranks.resolve(config.profile_ranks, world_size)
    if rank in selected or config.profile_trigger_file or config.profile_on_straggler:
        backend_name, _ = backends.choose(config)
        check_save_path(config.profile_save_path, rank, backend_name)
