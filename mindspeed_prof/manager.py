"""ProfilerManager: one per process; decides once whether this rank profiles, then runs the windows.

Life of a manager (the Megatron patches drive it; plain loops use ``mindspeed_prof.profile``)::

    manager = ProfilerManager(config, rank=r, world_size=w)   # rank chosen, backend chosen
    manager.arm(first_iteration=i0, train_iters=n)            # windows checked, save path checked
    for it in iterations:                                     # logged numbering, 1-based
        manager.step_begin(it); train_step(); manager.step_end(it)
    manager.close("finished")                                 # in a finally: always flushes

On a rank that does not profile, ``step_begin``/``step_end`` are a no-op function and nothing
else happens: no profiler object, no files, no per-step checks. A backend profiler is created only
when a window (or its warm-up iteration) arrives and is stopped right after it. With
``--profile-trigger-file`` every rank also takes part in the trigger check every K iterations.
"""

import os
import threading

from . import backends, budget, layout, log, ranks, trigger
from .environment import versions
from .errors import ConfigError
from .exits import FlushOnExit
from .manifest import Manifest, overall_status
from .window import StepSchedule, last_iteration, plan_windows


# What a user does about a profiler failure, by phase (training goes on without profiling here).
_FIX = {
    "start": "; training continues without profiling on this rank: check that the profiler "
             "works here (torch / torch_npu and CANN versions match), or try the other "
             "--profile-backend",
    "step": "; training continues, this rank's window is cut short: profile again, or try the "
            "other --profile-backend if it repeats",
    "stop": "; training continues, this rank's trace may be missing or partial: profile again, "
            "or try the other --profile-backend if it repeats",
}


def _nothing(iteration):
    return None


def check_save_path(path, rank, backend_name):
    """ConfigError unless this rank can write ``path`` (and torch_npu would accept its name)."""
    if backend_name == "npu":
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
        raise ConfigError(f"--profile-save-path {path} is not writable on rank {rank} "
                          f"({exc.strerror or exc}); choose a writable directory.") from None


def preflight(config, *, rank, world_size):
    """The checks that need no training state, run as soon as the flags are parsed (before the
    model is built): the ranks exist, and a rank that will profile has a working backend and a
    writable save path. Raises ConfigError. Rank selectors are resolved later, in arm()."""
    if not config.profile or ranks.needs_topology(config.profile_ranks):
        return
    selected = ranks.resolve(config.profile_ranks, world_size)
    if rank in selected or config.profile_trigger_file:
        backend_name, _ = backends.choose(config)
        check_save_path(config.profile_save_path, rank, backend_name)


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
        self.parallel, self._layout_of = parallel, layout_of
        self.closed = False
        self.schedule = None
        self.manifest = None
        self.backend_name = None
        self._plans = []
        self._backend = None
        self._window = None
        self._windows_opened = 0
        self._state = "idle"
        self._lock = threading.Lock()
        self._flush = FlushOnExit(self.close)
        self._watcher = None
        self._budget = None
        try:
            self.selected_ranks = (ranks.resolve(config.profile_ranks, world_size, layout_of)
                                   if config.profile else [])
            self.active = config.profile and rank in self.selected_ranks
            self.polling = config.profile and bool(config.profile_trigger_file)
            if self.active or self.polling:
                self.backend_name, _ = backends.choose(config)
        except BaseException:
            self._release()
            raise
        # Nothing to do per step on this rank: no window, no trigger check.
        self.idle = not (self.active or self.polling)
        if self.idle:
            self.step_begin = self.step_end = _nothing

    # -- start-up -----------------------------------------------------------------------------

    def arm(self, *, first_iteration=1, train_iters=None, exit_interval=None):
        """Check the windows, the save path and the disk budget before the first step."""
        self._train_end = last_iteration(first_iteration, train_iters, exit_interval)
        try:
            if self.config.profile:
                self._plans = plan_windows(self.config, first_iteration=first_iteration,
                                           train_iters=train_iters, exit_interval=exit_interval)
                self._announce()
            if self.active:
                check_save_path(self.save_path, self.rank, self.backend_name)
                self._budget = budget.RankBudget(self.config, self.backend_name,
                                                 self.selected_ranks)
                self._budget.check_start(self._plans, self.save_path,
                                         self._selected_on_this_node())
        except BaseException:
            self._release()
            raise
        if not (self.active or self.polling):
            return
        self._plans = self._plans if self.active else []
        self.schedule = self._plans.pop(0) if self._plans else None
        if self.active:
            self._create_manifest(first_iteration, train_iters)
        if self.polling:
            self._watcher = trigger.TriggerWatcher(self.config.profile_trigger_file,
                                           poll=self.config.profile_trigger_poll, rank=self.rank,
                                           world_size=self.world_size, report=self.report)
            self._watcher.set_state("armed")
        self._state = "armed" if (self.schedule or self.polling) else "done"
        self._flush.install()

    @property
    def save_path(self):
        return self.config.profile_save_path

    def _multi_window(self):
        config = self.config
        return bool(config.profile_every or config.profile_steps or config.profile_trigger_file)

    def _announce(self):
        if self.rank != 0:
            return
        where = os.path.abspath(self.save_path)
        if self.config.profile_trigger_file:
            log.info(f"armed for on-demand profiling: `mindspeed-prof trigger "
                     f"{self.config.profile_trigger_file} --steps N` profiles rank(s) "
                     f"{_short(self.selected_ranks)} -> {where}")
            return
        shown = ", ".join(p.describe() for p in self._plans[:3])
        more = f" and {len(self._plans) - 3} more windows" if len(self._plans) > 3 else ""
        log.info(f"profiling rank(s) {_short(self.selected_ranks)} at {shown}{more} -> {where}")

    def _selected_on_this_node(self):
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", 0) or 0)
        if not local_world or self.local_rank is None:
            return 1
        first = self.rank - self.local_rank
        return max(1, sum(1 for r in self.selected_ranks if first <= r < first + local_world))

    def _create_manifest(self, first_iteration=None, train_iters=None):
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

    # -- per step (hot path) ------------------------------------------------------------------

    def step_begin(self, iteration):
        """Iteration ``iteration`` (logged numbering) is about to run."""
        if self._watcher is not None and iteration % self.config.profile_trigger_poll == 0:
            self._guard("trigger", self._poll, iteration)
        state = self._state
        if state == "armed":
            if self.schedule is None or iteration < self.schedule.first_touched:
                return
            # Guarded like every backend call: building the window's profiler must not fail
            # the training step either.
            self._guard("start", self._open_window, iteration)
        elif state == "running":
            # Iterations Megatron skipped (--iterations-to-skip) never reached train_step; step
            # the profiler past them so the schedule stays aligned with the iteration numbers.
            self._guard("step", self._catch_up, iteration)

    def step_end(self, iteration):
        """Iteration ``iteration`` finished."""
        if self._state != "running":
            return
        self._guard("step", self._advance, iteration)

    # -- windows ------------------------------------------------------------------------------

    def _open_window(self, iteration):
        schedule = self.schedule
        if schedule.end is not None and iteration >= schedule.end:
            self.report("error", "start", f"iterations {schedule.start}-{schedule.end - 1} were "
                                          f"all skipped by the training loop; nothing profiled")
            self._next_window()
            return
        if not self._budget_allows(schedule):
            self._state = "done"
            return
        if self.manifest is None:
            self._create_manifest()
        directory = self._window_dir(schedule)
        self._window = self.manifest.add_window(schedule.start, schedule.end,
                                                os.path.relpath(directory, self.save_path))
        self._windows_opened += 1
        backend = backends.backend_class(self.backend_name)(
            config=self.config, rank=self.rank, save_dir=directory, schedule=schedule,
            metadata=self.parallel, report=self.report)
        window = self._window
        backend.on_saved = lambda: self._on_saved(backend, window)
        self._backend = backend
        self._state = "running"
        self.manifest.set_status("running")
        if self._watcher is not None:
            self._watcher.set_state("running", window=[schedule.start, schedule.end])
        self._guard("start", backend.start, iteration)

    def _window_dir(self, schedule):
        if not self._multi_window():
            return self.save_path
        return layout.window_dir(self.save_path, schedule.start, schedule.end)

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
        elif self._budget is not None and self._budget.limit_gb is not None and executed:
            self._stop_if_over_budget()

    def _finish_window(self):
        self._guard("stop", self._backend.stop)
        self._on_saved(self._backend, self._window)
        self._next_window()

    def _next_window(self):
        self.schedule = self._plans.pop(0) if self._plans else None
        self._state = "armed" if (self.schedule or self._watcher) else "done"

    def _on_saved(self, backend, window):
        """Called when a window's data reaches disk (from the export thread for async exports)."""
        with self._lock:
            if self.manifest is None:
                return
            base = os.path.dirname(self.manifest.path)
            new = [p for p in backend.outputs() if os.path.relpath(p, base) not in window["files"]]
            for path in new:
                log.info(f"wrote {path}", rank=self.rank)
            self.manifest.add_files(new, window, save=False)
            window["status"] = status = backend.status()
            self.manifest.set_status(overall_status(self.manifest.data["windows"]))  # one write
            if self._watcher is not None and self._state != "running":
                self._watcher.set_state(trigger.STATE_OF_STATUS.get(status, status),
                                        window=[window["start"], window["end"]])

    # -- budget -------------------------------------------------------------------------------

    def _used(self):
        """Bytes this rank's finished windows wrote (the manifest lists them)."""
        if self.manifest is None:
            return 0
        base = os.path.dirname(self.manifest.path)
        return budget.used_bytes([os.path.join(base, f) for f in self.manifest.data["files"]])

    def _budget_allows(self, schedule):
        if self._budget is None or self._budget.allows(schedule, self._used()):
            return True
        self.report("warning", "budget", f"skipping iterations {schedule.start}-"
                                         f"{schedule.end - 1} and later windows: this rank's "
                                         f"share of --profile-max-gb {self.config.profile_max_gb:g} "
                                         f"would be exceeded")
        return False

    def _stop_if_over_budget(self):
        if not self._budget.crossed(self._used() + budget.used_bytes(self._backend.outputs())):
            return
        self.report("warning", "budget", f"stopping the window early after iteration "
                                         f"{self._window['iterations_recorded'][-1]}: this rank's "
                                         f"share of --profile-max-gb {self.config.profile_max_gb:g} "
                                         f"was crossed")
        self._window["stopped_early"] = "--profile-max-gb"
        self._plans = []
        self._finish_window()

    # -- on-demand trigger --------------------------------------------------------------------

    def _poll(self, iteration):
        request = self._watcher.check(iteration)  # every rank, same iteration: one broadcast
        if request is None:
            return
        window = trigger.window_for(request, iteration, self._train_end)
        if window is None or self._state == "running":
            if self.rank == 0:
                self.report("warning", "trigger", f"request {request['id']} ignored at iteration "
                                                  f"{iteration}: a window is still running or "
                                                  f"training ends now")
            return
        chosen = (ranks.resolve(ranks.parse_rank_tokens(request["ranks"]), self.world_size,
                                self._layout_of) if request["ranks"] else self.selected_ranks)
        if self.rank == 0:
            log.info(f"trigger {request['id']}: profiling rank(s) {_short(chosen)} at iterations "
                     f"{window[0]}-{window[1]}")
        if self.rank in chosen:
            # Warm up on the iteration about to run; record the requested ones after it.
            self.schedule = StepSchedule(skip_first=iteration, warmup=1,
                                         active=window[1] - iteration)
            self._state = "armed"

    # -- reporting ----------------------------------------------------------------------------

    def _guard(self, phase, func, *args):
        """Run a backend call; a profiler failure is reported and ends profiling on this rank."""
        try:
            return func(*args)
        except Exception as exc:  # noqa: BLE001 - training must survive any profiler failure
            self.report("error", phase, f"{type(exc).__name__}: {exc}{_FIX.get(phase, '')}")
            if phase == "trigger":
                return None
            if self._backend is not None:
                self._backend.failed = True
            if self._state == "running":
                self._state = "done"
                try:
                    self._backend.stop()
                except Exception as stop_exc:  # noqa: BLE001
                    self.report("error", "stop", f"{type(stop_exc).__name__}: {stop_exc}")
                self._on_saved(self._backend, self._window)
            elif self._window is not None and self._window["status"] == "running":
                # The window's profiler could not even be built: the window failed, not running.
                self._window["status"] = "failed"
                self.manifest.set_status(overall_status(self.manifest.data["windows"]))
            self._state, self._plans = "done", []
            return None

    def report(self, kind, phase, message):
        """Log on this rank and record in the manifest; never raises."""
        (log.error if kind == "error" else log.warning)(f"{phase}: {message}", rank=self.rank)
        if self.manifest is not None:
            self.manifest.record(kind, phase, message)

    # -- shutdown -----------------------------------------------------------------------------

    def close(self, reason="finished", detail=None, wait_timeout=None, wait=True):
        """Stop any running window, wait for its files, write the final manifest. Idempotent.

        ``wait=False`` leaves a background export running (its thread keeps the process alive
        and finishes the manifest); see ``wait()``."""
        if self.closed:
            return
        self.closed = True
        try:
            if self._state == "running":
                recorded = self._window["iterations_recorded"]
                self._plans = []
                self._finish_window()
                if recorded:
                    self.report("warning", "stop", f"training ended ({reason}) inside the window; "
                                                   f"iterations {recorded} were recorded")
                else:
                    self.report("warning", "stop", f"training ended ({reason}) before iteration "
                                                   f"{self._window['start']} completed; nothing "
                                                   f"was profiled")
            if wait and not self.wait(wait_timeout):
                self.report("error", "stop", f"the trace was still being written when the "
                                             f"process ended (waited at most {wait_timeout} s); "
                                             f"it is incomplete")
            if self.manifest is not None:
                self._finish_manifest(reason, detail)
            if self._watcher is not None:
                self._watcher.set_state("idle", reason=reason)
        finally:
            self._flush.uninstall()
            self._release()

    def wait(self, timeout=None):
        """Wait for the last window's background export/parse; True when nothing is pending."""
        return self._backend is None or self._backend.wait(timeout)

    def _finish_manifest(self, reason, detail):
        self.manifest.data["exit"] = {"reason": reason, "detail": detail}
        if not self._windows_opened and not self.polling:
            self.manifest.data["status"] = "incomplete"
            start = self.schedule.start if self.schedule else self.config.profile_step_start
            self.report("warning", "stop", f"training ended ({reason}) before iteration {start}; "
                                           f"nothing was profiled")
        elif self._backend is not None:
            self._on_saved(self._backend, self._window)
        self.manifest.save()

    def _release(self):
        with ProfilerManager._live_lock:
            if ProfilerManager._live is self:
                ProfilerManager._live = None


def _short(selected):
    if not selected:
        return "none"
    if selected == list(range(selected[0], selected[-1] + 1)) and len(selected) > 2:
        return f"{selected[0]}-{selected[-1]}"
    return ",".join(str(r) for r in selected)
