"""Backend choice: decided once per process from ``--profile-backend``.

Each backend is one row of ``KINDS``: a small class that answers what the rest of the core asks of
a backend before one is built (is it usable here, which flags does it ignore, what it says about a
config, whether it accepts a save path, the call show-config prints) and names its recorder class.
Nobody else compares a backend's name to a string: a new backend is one class and one row
(docs/development.md's recipes). The heavy modules (torch, torch_npu) load inside the methods.
"""

from typing import Any, Dict, List, Optional, Tuple

from ..errors import BackendUnavailable


class BackendKind:
    """What a backend answers without being built; the defaults are those of a backend that
    honours every flag and every path."""

    name = ""
    installation = ""  # what to fix when it is not usable

    def usable(self) -> Tuple[bool, str]:
        return True, ""

    def backend_class(self) -> type:
        raise NotImplementedError

    def ignored_flags(self, config: Any) -> List[str]:
        """Flags set away from their default that this backend cannot honour."""
        return []

    def config_notes(self, config: Any) -> List[str]:
        """What a profiled rank says once about ``config`` under this backend."""
        return []

    def path_refusal(self, path: str) -> Optional[str]:
        """Why this backend would refuse ``path`` as a save path, or None."""
        return None

    def describe_call(self, config: Any, schedule: Any, save_path: str, rank: int,
                      worker: Optional[str] = None) -> Tuple[Any, List[str]]:
        """The profiler call a rank would make, as show-config prints it, and its notes."""
        raise NotImplementedError


class NpuKind(BackendKind):
    name = "npu"
    installation = "torch_npu"

    def usable(self) -> Tuple[bool, str]:
        from . import npu

        ok, detail = npu.usable()
        return bool(ok), str(detail or "")

    def backend_class(self) -> type:
        from .npu import NpuBackend
        return NpuBackend

    def config_notes(self, config: Any) -> List[str]:
        from .npu_options import step_ids_note

        note = step_ids_note(config)
        return [note] if note else []

    def path_refusal(self, path: str) -> Optional[str]:
        from .npu_options import unsupported_path_reason
        return unsupported_path_reason(path)

    def describe_call(self, config, schedule, save_path, rank, worker=None):
        from .describe import npu_call
        return npu_call(config, schedule, save_path, rank, worker)


class TorchKind(BackendKind):
    name = "torch"
    installation = "torch"

    def backend_class(self) -> type:
        from .torch_backend import TorchBackend
        return TorchBackend

    def ignored_flags(self, config: Any) -> List[str]:
        from .torch_backend import ignored_flags as torch_ignored
        return list(torch_ignored(config))

    def describe_call(self, config, schedule, save_path, rank, worker=None):
        from .describe import torch_call
        return torch_call(config, schedule, save_path, rank, worker)


KINDS: Dict[str, BackendKind] = {kind.name: kind for kind in (NpuKind(), TorchKind())}
# What ``--profile-backend auto`` tries, in order: the first usable one.
AUTO_ORDER = ("npu", "torch")


def kind(name: str) -> BackendKind:
    return KINDS[name]


def choose(config: Any) -> Tuple[str, Optional[str]]:
    """(backend name, a detail: the chosen one's version, or why the first choice was passed
    over). ``auto`` takes the first usable backend of ``AUTO_ORDER``; a backend named explicitly
    that is not usable is an error."""
    wanted = config.profile_backend
    candidates = AUTO_ORDER if wanted == "auto" else (wanted,)
    detail: Optional[str] = None
    for name in candidates:
        ok, why = KINDS[name].usable()
        if ok:
            return name, (why or None) if name == candidates[0] else detail
        detail = why
        if wanted != "auto":
            raise BackendUnavailable(
                why if why.startswith("--profile-backend")
                else f"--profile-backend {name}: {why}; use --profile-backend "
                     f"{' or '.join(n for n in KINDS if n != name)} or fix the "
                     f"{KINDS[name].installation} installation.")
    raise BackendUnavailable(f"--profile-backend auto: no backend is usable ({detail}).")


def backend_class(name: str) -> type:
    return KINDS[name].backend_class()


def ignored_flags(name: str, config: Any) -> List[str]:
    """Flags set away from their default that backend ``name`` cannot honour."""
    return KINDS[name].ignored_flags(config)
