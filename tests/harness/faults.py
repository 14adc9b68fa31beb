"""Test-only misbehaviour injected into the stand-in's training step.

Iterations are the logged (1-based) numbers. Environment knobs:

* ``HARNESS_RAISE_AT_ITER=N``: raise ``RuntimeError`` inside the step of iteration N;
* ``HARNESS_SIGNAL_AT_ITER=N`` with ``HARNESS_SIGNAL=TERM|INT`` (default TERM): send that
  signal to this process during iteration N;
* ``HARNESS_SLEEP_AT_ITER=N:SECONDS``: sleep that long inside iteration N;
* ``HARNESS_SLOW_FROM_ITER=N:SECONDS``: sleep that long inside every iteration from N on (a
  straggler: a rank that stays slow);
* ``HARNESS_BUSY_FROM_ITER=N:SECONDS``: compute (``aten::mm``) for about that long inside every
  iteration from N on (a slowed operator: the time shows in the trace, on that operator);
* ``HARNESS_SLOW_FORWARD_FROM_ITER=N:SECONDS``: every forward step (each micro-batch's
  ``forward_step_func``) of every iteration from N on first computes (``aten::mm``) for about
  that long: a rank whose forward is slowed (a throttled device), its losses unchanged;
* ``HARNESS_SLOW_FORWARD_S=SECONDS``: every microbatch's forward (the entry script's
  ``forward_step``, inside Megatron's schedule) sleeps that long first: a slowed pipeline stage
  (with ``@R``, the ranks of that stage);
* ``HARNESS_SLOW_EXPORT_S=SECONDS``: every ``torch.profiler.profile.export_chrome_trace`` sleeps
  that long first (a huge trace, a slow disk), so a test can show who waits for the export;
* ``HARNESS_TORCH_PROFILER_FAIL=init,start,stop,export``: those ``torch.profiler.profile`` calls
  raise (``export`` as a save path that became unwritable: ``PermissionError(EACCES)``);
* ``HARNESS_MAX_FILE_KB=K``: the rank cannot write a file past K KiB (``RLIMIT_FSIZE``; writes fail
  with EFBIG as they fail with ENOSPC on a full disk), so a large trace hits a "full disk";
* ``HARNESS_CLOCK_AHEAD_AT_ITER=N:SECONDS``: from iteration N on, ``--exit-duration-in-mins``
  reads a clock SECONDS ahead, so a test can make the wall-time limit strike at iteration N;
* ``HARNESS_NPU_ALLOC_MB=N``: every training step "allocates" N MiB on the torch_npu double's
  device and frees it (``torch_npu.npu.memory._fake_device_alloc``: tests/fakes on PYTHONPATH), so
  the allocator has a history to record;
* ``HARNESS_NPU_OOM_AT_ITER=N``: the step of iteration N asks the double's device for more than it
  has: torch.OutOfMemoryError, after the out-of-memory observers ran;
* ``HARNESS_FAULT_RANKS=0,1``: only these global ranks misbehave (default: all).

A knob's value may end in ``@R,R`` to apply to those global ranks only, overriding
``HARNESS_FAULT_RANKS`` for that knob: ``HARNESS_RAISE_AT_ITER=4@1`` with
``HARNESS_SLEEP_AT_ITER=4:60@0`` fails rank 1 while rank 0 is outside any collective. Entries
separated by ``;`` give ranks different values (the first that names the rank wins):
``HARNESS_TORCH_PROFILER_FAIL=init@0;stop@1``.
"""

import dataclasses
import errno
import os
import signal
import time

_SIGNALS = {"TERM": signal.SIGTERM, "INT": signal.SIGINT}
_PROFILER_CALLS = {"init": "__init__", "start": "start", "stop": "stop",
                   "export": "export_chrome_trace"}


def _optional_int(value):
    return int(value) if value else None


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    raise_at: int = None
    signal_at: int = None
    signal_name: str = "TERM"
    sleep_at: int = None
    sleep_s: float = 0.0
    slow_from: int = None
    slow_s: float = 0.0
    busy_from: int = None
    busy_s: float = 0.0
    forward_from: int = None
    forward_s: float = 0.0
    slow_export_s: float = 0.0
    slow_forward_s: float = 0.0
    profiler_fail: tuple = ()
    clock_at: int = None
    clock_ahead_s: float = 0.0
    max_file_kb: int = None
    npu_alloc_mb: int = None
    npu_oom_at: int = None

    @classmethod
    def from_env(cls, env):
        rank = int(env.get("RANK", "0"))
        default_ranks = env.get("HARNESS_FAULT_RANKS")

        def knob(name):
            for entry in env.get(name, "").split(";"):
                value, _, ranks = entry.partition("@")
                ranks = ranks or default_ranks
                if not ranks or rank in {int(r) for r in ranks.split(",")}:
                    return value
            return ""

        signal_name = env.get("HARNESS_SIGNAL", "TERM").upper().removeprefix("SIG")
        if signal_name not in _SIGNALS:
            raise ValueError(f"HARNESS_SIGNAL={signal_name} must be one of {sorted(_SIGNALS)}")
        sleep_at, _, sleep_s = knob("HARNESS_SLEEP_AT_ITER").partition(":")
        clock_at, _, clock_s = knob("HARNESS_CLOCK_AHEAD_AT_ITER").partition(":")
        slow_from, _, slow_s = knob("HARNESS_SLOW_FROM_ITER").partition(":")
        busy_from, _, busy_s = knob("HARNESS_BUSY_FROM_ITER").partition(":")
        forward_from, _, forward_s = knob("HARNESS_SLOW_FORWARD_FROM_ITER").partition(":")
        fail = tuple(p for p in knob("HARNESS_TORCH_PROFILER_FAIL").split(",") if p)
        unknown = sorted(set(fail) - set(_PROFILER_CALLS))
        if unknown:
            raise ValueError(f"HARNESS_TORCH_PROFILER_FAIL: unknown {unknown}; use any of "
                             f"{', '.join(_PROFILER_CALLS)}")
        return cls(
            raise_at=_optional_int(knob("HARNESS_RAISE_AT_ITER")),
            signal_at=_optional_int(knob("HARNESS_SIGNAL_AT_ITER")),
            signal_name=signal_name,
            sleep_at=_optional_int(sleep_at),
            sleep_s=float(sleep_s or 0.0),
            slow_from=_optional_int(slow_from),
            slow_s=float(slow_s or 0.0),
            busy_from=_optional_int(busy_from),
            busy_s=float(busy_s or 0.0),
            forward_from=_optional_int(forward_from),
            forward_s=float(forward_s or 0.0),
            slow_export_s=float(knob("HARNESS_SLOW_EXPORT_S") or 0.0),
            slow_forward_s=float(knob("HARNESS_SLOW_FORWARD_S") or 0.0),
            profiler_fail=fail,
            clock_at=_optional_int(clock_at),
            clock_ahead_s=float(clock_s or 0.0),
            max_file_kb=_optional_int(knob("HARNESS_MAX_FILE_KB")),
            npu_alloc_mb=_optional_int(knob("HARNESS_NPU_ALLOC_MB")),
            npu_oom_at=_optional_int(knob("HARNESS_NPU_OOM_AT_ITER")),
        )

    def limit_file_size(self):
        """Let this process write no file past ``max_file_kb`` KiB (a full disk, as root too)."""
        if self.max_file_kb is None:
            return
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.max_file_kb * 1024, hard))

    def clock(self, iteration):
        """The wall clock as ``--exit-duration-in-mins`` sees it after ``iteration``."""
        ahead = self.clock_at is not None and iteration >= self.clock_at
        return time.time() + (self.clock_ahead_s if ahead else 0.0)

    def break_torch_profiler(self):
        """Make the ``torch.profiler.profile`` calls named in ``profiler_fail`` raise."""
        if not self.profiler_fail:
            return
        import torch.profiler

        for point in self.profiler_fail:
            name = _PROFILER_CALLS[point]
            setattr(torch.profiler.profile, name, _failing(point, name))

    def slow_down_export(self):
        """Make torch.profiler's chrome-trace export take ``slow_export_s`` longer."""
        if not self.slow_export_s:
            return
        import torch.profiler

        original = torch.profiler.profile.export_chrome_trace
        delay = self.slow_export_s

        def export_chrome_trace(self, path):
            time.sleep(delay)
            return original(self, path)

        torch.profiler.profile.export_chrome_trace = export_chrome_trace

    def slow_forward(self, forward_step_func, iteration):
        """``forward_step_func``, slowed from ``forward_from`` on (the same outputs)."""
        if self.forward_from is None or iteration < self.forward_from:
            return forward_step_func
        seconds = self.forward_s

        def forward_step(*args, **kwargs):
            _busy(seconds)
            return forward_step_func(*args, **kwargs)

        return forward_step

    def slowed_forward(self, forward_step_func):
        """The entry script's forward step, slowed by ``HARNESS_SLOW_FORWARD_S`` (as it is
        when the knob is not set)."""
        if not self.slow_forward_s:
            return forward_step_func
        seconds = self.slow_forward_s

        def slow_forward_step(*args, **kwargs):
            time.sleep(seconds)
            return forward_step_func(*args, **kwargs)

        return slow_forward_step

    def at_step(self, iteration):
        """Misbehave as planned for logged iteration ``iteration``."""
        if iteration == self.sleep_at:
            time.sleep(self.sleep_s)
        if self.slow_from is not None and iteration >= self.slow_from:
            time.sleep(self.slow_s)
        if self.busy_from is not None and iteration >= self.busy_from:
            _busy(self.busy_s)
        if iteration == self.signal_at:
            os.kill(os.getpid(), _SIGNALS[self.signal_name])
        if self.npu_alloc_mb or iteration == self.npu_oom_at:
            from torch_npu.npu import memory

            if iteration == self.npu_oom_at:
                memory._fake_device_alloc(1 << 50)  # more than any device holds
            memory._fake_device_free(memory._fake_device_alloc(self.npu_alloc_mb << 20))
        if iteration == self.raise_at:
            raise RuntimeError(f"HARNESS_RAISE_AT_ITER: injected failure at iteration {iteration}")


def _busy(seconds):
    """Matrix products for about ``seconds``: real operator time, as a throttled device shows."""
    import torch

    a = torch.ones(192, 192)
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        a = torch.mm(a, a).clamp_(max=1.0)


def _failing(point, name):
    def fail(self, *args, **kwargs):
        if point == "export":
            raise PermissionError(errno.EACCES, "Permission denied (HARNESS_TORCH_PROFILER_FAIL)")
        raise RuntimeError(f"HARNESS_TORCH_PROFILER_FAIL: torch.profiler.profile.{name} broken")

    return fail
