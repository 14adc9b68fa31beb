"""ProfilerManager: one per process; decides once whether this rank profiles, then runs the window.

Life of a manager (the Megatron patches drive it; plain loops use ``mindspeed_prof.profile``)::

    manager = ProfilerManager(config, rank=r, world_size=w)   # rank chosen, backend chosen
    manager.arm(first_iteration=i0, train_iters=n)            # window checked, save path checked
    for it in iterations:                                     # logged numbering, 1-based
        manager.step_begin(it); train_step(); manager.step_end(it)
    manager.close("finished")                                 # in a finally: always flushes

On a rank that does not profile, ``step_begin``/``step_end`` are a no-op function and nothing
else happens: no profiler object, no files, no per-step checks. The backend's profiler is created
only when the window (or its warm-up iteration) arrives and is stopped right after it.
"""

import atexit
import os
import signal
import threading

from . import backends, layout, log, ranks
from .environment import versions
from .errors import ConfigError
from .manifest import Manifest
from .window import plan_window

# How long a SIGTERM'd rank waits for a trace still being written before it dies: torchrun
# follows SIGTERM with SIGKILL after 30 s.
SIGNAL_FLUSH_TIMEOUT_S = 20


def _nothing(iteration):
    return None


class ProfilerManager:
    _live = None
    _live_lock = threading.Lock()

    def __init__(self, config, *, rank=0, world_size=1, local_rank=None, layout_of=None,
                 parallel=None):
        """``layout_of`` maps global rank -> {tp, pp, dp, cp, ep, node} (for rank selectors);
        ``parallel`` is the job's parallel sizes, written as torch_npu ``distributed_args``."""
        with ProfilerManager._live_lock:
            live = ProfilerManager._live
            if live is not None and not live.closed:
                raise RuntimeError(
                    "mindspeed_prof runs one profiler per process and one is already active "
                    "(two profilers on one thread make torch's and torch_npu's fail); close() it "
                    "before creating another.")
            ProfilerManager._live = self
        self.config = config
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        self.parallel = parallel
        self.closed = False
        self.schedule = None
        self.manifest = None
        self.backend_name = None
        self._backend = None
        self._window = None
        self._state = "idle"
        self._lock = threading.Lock()
        self._previous_sigterm = None
        try:
            self.selected_ranks = (ranks.resolve(config.profile_ranks, world_size, layout_of)
                                   if config.profile else [])
            self.active = config.profile and rank in self.selected_ranks
            if self.active:
                self.backend_name, _ = backends.choose(config)
        except BaseException:
            self._release()
            raise
        if not self.active:
            self.step_begin = self.step_end = _nothing

    # -- start-up -----------------------------------------------------------------------------

    def arm(self, *, first_iteration=1, train_iters=None, exit_interval=None):
        """Check the window and the save path before the first step; ConfigError if unworkable."""
        try:
            if self.config.profile:
                self.schedule = plan_window(
                    start=self.config.profile_step_start, end=self.config.profile_step_end,
                    first_iteration=first_iteration, train_iters=train_iters,
                    exit_interval=exit_interval)
            if self.rank == 0 and self.config.profile:
                log.info(f"profiling rank(s) {_short(self.selected_ranks)} at "
                         f"{self.schedule.describe()} -> {os.path.abspath(self.save_path)}")
            if not self.active:
                return
            self._prepare_save_path()
        except BaseException:
            self._release()
            raise
        self.manifest = Manifest(
            layout.manifest_path(self.save_path, self.rank), rank=self.rank,
            world_size=self.world_size, local_rank=self.local_rank, backend=self.backend_name,
            config=self.config, selected_ranks=self.selected_ranks, parallel=self.parallel,
            versions=versions())
        self.manifest.data["first_iteration"] = first_iteration
        self.manifest.data["train_iters"] = train_iters
        self.manifest.save()
        notes = list(self.config.warnings())
        ignored = backends.ignored_flags(self.backend_name, self.config)
        if ignored:
            notes.append(f"{', '.join(ignored)} only apply to the npu backend; the "
                         f"{self.backend_name} backend ignores them.")
        for note in notes:
            self.report("warning", "config", note)
        self._state = "armed"
        self._install_flush_on_exit()

    @property
    def save_path(self):
        return self.config.profile_save_path

    def _prepare_save_path(self):
        path = self.save_path
        if self.backend_name == "npu":
            from .backends.npu_options import unsupported_path_reason
            reason = unsupported_path_reason(os.path.abspath(path))
            if reason:
                raise ConfigError(f"--profile-save-path {path} {reason}; choose another directory.")
        probe = os.path.join(path, f".mindspeed_prof_write_test.{os.getpid()}")
        try:
            os.makedirs(path, exist_ok=True)
            with open(probe, "w") as handle:
                handle.write("ok")
            os.unlink(probe)
        except OSError as exc:
            raise ConfigError(f"--profile-save-path {path} is not writable on rank {self.rank} "
                              f"({exc.strerror or exc}); choose a writable directory.") from None

    # -- per step (hot path) ------------------------------------------------------------------

    def step_begin(self, iteration):
        """Iteration ``iteration`` (logged numbering) is about to run."""
        state = self._state
        if state == "armed":
            if iteration < self.schedule.first_touched:
                return
            self._open_window(iteration)
        elif state == "running":
            # Iterations Megatron skipped (--iterations-to-skip) never reached train_step; step
            # the profiler past them so the schedule stays aligned with the iteration numbers.
            self._guard("step", self._catch_up, iteration)

    def step_end(self, iteration):
        """Iteration ``iteration`` finished."""
        if self._state != "running":
            return
        self._guard("step", self._advance, iteration)

    # -- window -------------------------------------------------------------------------------

    def _open_window(self, iteration):
        end = self.schedule.end
        if end is not None and iteration >= end:
            self._state = "done"
            self.report("error", "start", f"iterations {self.schedule.start}-{end - 1} were all "
                                          f"skipped by the training loop; nothing was profiled")
            return
        self._window = self.manifest.add_window(self.schedule.start, end)
        self._backend = backends.backend_class(self.backend_name)(
            config=self.config, rank=self.rank, save_dir=self.save_path, schedule=self.schedule,
            metadata=self.parallel, report=self.report)
        self._backend.on_saved = self._on_saved
        self._state = "running"
        self.manifest.set_status("running")
        self._guard("start", self._backend.start, iteration)

    def _catch_up(self, iteration):
        while self._state == "running" and self._backend.step_num < iteration:
            self._advance(self._backend.step_num, executed=False)

    def _advance(self, iteration, executed=True):
        self._backend.step()
        if executed and iteration >= self.schedule.start:
            self._window["iterations_recorded"].append(iteration)
        end = self.schedule.end
        if end is not None and iteration + 1 >= end:
            self._finish_window()

    def _finish_window(self):
        self._state = "done"
        self._guard("stop", self._backend.stop)
        self._on_saved()

    def _on_saved(self):
        """Called when data reaches disk (from the export thread for async torch exports)."""
        with self._lock:
            if self.manifest is None or self._window is None:
                return
            backend = self._backend
            base = os.path.dirname(self.manifest.path)
            new = [p for p in backend.outputs()
                   if os.path.relpath(p, base) not in self._window["files"]]
            for path in new:
                log.info(f"wrote {path}", rank=self.rank)
            self.manifest.add_files(new, self._window)
            if backend.failed:
                status = "failed"
            elif self.config.profile_analyse == "offline" and backend.name == "npu":
                status = "unparsed"  # as asked: raw data now, `mindspeed-prof analyse` later
            elif not backend.saved.is_set() or backend.pending_note():
                status = "parsing"
            elif not backend.outputs():
                status = "incomplete"
            else:
                status = "complete"
            self._window["status"] = status
            if self._state == "done" or self.closed:
                self.manifest.set_status(status)

    def _guard(self, phase, func, *args):
        """Run a backend call; a profiler failure is reported and ends profiling on this rank."""
        try:
            return func(*args)
        except Exception as exc:  # noqa: BLE001 - training must survive any profiler failure
            self.report("error", phase, f"{type(exc).__name__}: {exc}")
            if self._backend is not None:
                self._backend.failed = True
            if self._state == "running":
                self._state = "done"
                try:
                    self._backend.stop()
                except Exception as stop_exc:  # noqa: BLE001
                    self.report("error", "stop", f"{type(stop_exc).__name__}: {stop_exc}")
                self._on_saved()
            return None

    # -- reporting ----------------------------------------------------------------------------

    def report(self, kind, phase, message):
        """Log on this rank and record in the manifest; never raises."""
        (log.error if kind == "error" else log.warning)(f"{phase}: {message}", rank=self.rank)
        if self.manifest is not None:
            self.manifest.record(kind, phase, message)

    # -- shutdown -----------------------------------------------------------------------------

    def close(self, reason="finished", detail=None, wait_timeout=None):
        """Stop any running window, wait for its files, write the final manifest. Idempotent."""
        if self.closed:
            return
        self.closed = True
        try:
            if self._state == "running":
                recorded = self._window["iterations_recorded"]
                self._finish_window()
                if recorded:
                    self.report("warning", "stop", f"training ended ({reason}) inside the window; "
                                                   f"iterations {recorded} were recorded")
                else:
                    self.report("warning", "stop", f"training ended ({reason}) before iteration "
                                                   f"{self.schedule.start} completed; nothing was "
                                                   f"profiled")
            if self._backend is not None and not self._backend.wait(wait_timeout):
                self.report("error", "stop", f"the trace was still being written after "
                                             f"{wait_timeout} s when the process ended")
            if self.manifest is not None:
                self.manifest.data["exit"] = {"reason": reason, "detail": detail}
                if self._window is None:
                    self.manifest.data["status"] = "incomplete"
                    self.report("warning", "stop", f"training ended ({reason}) before "
                                                   f"iteration {self.schedule.start}; nothing was "
                                                   f"profiled")
                else:
                    self._on_saved()
                self.manifest.save()
        finally:
            self._uninstall_flush_on_exit()
            self._release()

    def _release(self):
        with ProfilerManager._live_lock:
            if ProfilerManager._live is self:
                ProfilerManager._live = None

    def _install_flush_on_exit(self):
        atexit.register(self._close_at_exit)
        # Python's default SIGTERM kills the process without running finally blocks or atexit,
        # losing the window torchrun interrupts. Only take over when nobody else handles it
        # (Megatron's --exit-signal-handler does, and then exits through sys.exit).
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self._previous_sigterm = signal.SIG_DFL
            signal.signal(signal.SIGTERM, self._flush_on_sigterm)

    def _uninstall_flush_on_exit(self):
        atexit.unregister(self._close_at_exit)
        if self._previous_sigterm is not None and \
                threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) == self._flush_on_sigterm:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None

    def _close_at_exit(self):
        self.close("process exit", "the training loop did not close the profiler")

    def _flush_on_sigterm(self, signum, frame):
        self.close("signal", "SIGTERM", wait_timeout=SIGNAL_FLUSH_TIMEOUT_S)
        # Then die of SIGTERM as the process would have without us.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _short(selected):
    if not selected:
        return "none"
    if selected == list(range(selected[0], selected[-1] + 1)) and len(selected) > 2:
        return f"{selected[0]}-{selected[-1]}"
    return ",".join(str(r) for r in selected)
