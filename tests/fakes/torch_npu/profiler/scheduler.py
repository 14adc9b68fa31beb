"""Schedule (exported as torch_npu.profiler.schedule) and ProfilerAction.

Like the real class, the constructor is not wrapped in no_exception_func, so an
unknown keyword (skip_first_wait= before 2.11) raises TypeError. The instance
__dict__ is written to profiler_info.json, so attribute order matters.
"""

from enum import Enum

from torch_npu import _version
from ._console import ErrCode, print_warn_msg, prof_error

__all__ = ["ProfilerAction", "Schedule"]


class ProfilerAction(Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


class Schedule:
    """Skip ``skip_first`` steps, then cycle ``wait`` NONE, ``warmup`` WARMUP and ``active``
    recorded steps (the last one RECORD_AND_SAVE), ``repeat`` times (0 = forever)."""

    if _version.HAS_SKIP_FIRST_WAIT:
        def __init__(self, wait: int, active: int, warmup: int = 0, repeat: int = 0,
                     skip_first: int = 0, skip_first_wait: int = 0) -> None:
            self.wait = wait
            self.active = active
            self.warmup = warmup
            self.repeat = repeat
            self.skip_first = skip_first
            self.skip_first_wait = skip_first_wait
            self._check_params()
    else:
        def __init__(self, wait: int, active: int, warmup: int = 0, repeat: int = 0,
                     skip_first: int = 0) -> None:
            self.wait = wait
            self.active = active
            self.warmup = warmup
            self.repeat = repeat
            self.skip_first = skip_first
            self._check_params()

    def __call__(self, step: int) -> ProfilerAction:
        if step < 0:
            raise ValueError("Invalid parameter step, which must be not less than 0." + prof_error(ErrCode.VALUE))
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        if getattr(self, "skip_first_wait", 0) != 0:
            step += self.wait
        cycle = self.wait + self.warmup + self.active
        if self.repeat > 0 and step / cycle >= self.repeat:
            return ProfilerAction.NONE
        position = step % cycle
        if position < self.wait:
            return ProfilerAction.NONE
        if position < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if position < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    def _check_params(self) -> None:
        for name, floor, reset in (("wait", 0, 0), ("warmup", 0, 0), ("active", 1, 1),
                                   ("repeat", 0, 0), ("skip_first", 0, 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < floor:
                print_warn_msg(f"Invalid parameter {name}, reset it to {reset}.")
                setattr(self, name, reset)
        if _version.HAS_SKIP_FIRST_WAIT and not isinstance(self.skip_first_wait, int):
            print_warn_msg("Invalid parameter skip_first_wait, reset it to 0.")
            self.skip_first_wait = 0
        if self.warmup == 0:
            print_warn_msg("Profiler won't be using warmup, this can skew profiler results")


def _default_schedule_fn(_: int) -> ProfilerAction:
    """Without a schedule every step is RECORD, so no step markers are emitted."""
    return ProfilerAction.RECORD
