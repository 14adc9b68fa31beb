"""The window recorder: the engine every scenario shares (DESIGN §6).

A recorder is told that unit ``n`` begins and ends (an iteration, a request, an RL step) and does
the rest: it decides once whether this rank records, plans the windows from the ``--profile*``
flags in its unit, opens, steps and closes profiler sessions through a backend, writes the
manifest, surfaces every profiler error and flushes on every way out. It knows nothing of
Megatron, requests or roles; drivers (``drivers/``) translate a scenario's events into
``begin(n)``/``end(n)``::

    recorder = WindowRecorder(config, rank=r, world_size=w, unit=REQUEST)
    recorder.arm(first=1, last=None)          # windows checked, save path checked
    for n in units:                           # the scenario's numbering, 1-based
        recorder.begin(n); work(); recorder.end(n)
    recorder.close("finished")                # in a finally: always flushes

On a rank that does not record, ``begin``/``end`` are a no-op function and nothing else happens:
no profiler object, no files, no per-unit checks. A backend profiler is created only when a
window (or its warm-up unit) arrives and is stopped right after it. With
``--profile-trigger-file`` every rank also takes part in the trigger check every K units.

Two process-wide rules live here because only the recorder sees every session:
- one *running* session per process: torch's and torch_npu's profilers cannot nest, so a
  recorder whose session would overlap another's (colocated RL roles) is refused, loudly;
- a session is stepped and stopped on the thread that started it: torch.profiler records only
  that thread, and stopping it from another one crashed torch 2.13 in export.
"""

import contextlib
import os
import threading
from typing import Callable, Iterable, Iterator, Optional

from . import backends, budget, layout, log, ranks, session_slot, trigger
from .config import ProfilerConfig
from .environment import versions
from .exits import FlushOnExit, final_flush
from .manifest import Manifest, overall_status
from .notices import announce_plan, failure_fix, short_ranks
from .startup import check_save_path
from .units import ITERATION, Unit
from .window import OPEN_ENDED, StepSchedule, last_iteration, plan_windows, several_windows


def _nothing(n):
    return None


class WindowRecorder:
    def __init__(self, config: ProfilerConfig, *, rank: int = 0, world_size: int = 1,
                 local_rank: Optional[int] = None, layout_of: Optional[Callable] = None,
                 parallel: Optional[dict] = None, unit: Unit = ITERATION,
                 role: Optional[str] = None, session_per_unit: bool = False,
                 save_path: Optional[str] = None):
        """``layout_of`` maps global rank -> {tp, pp, dp, cp, ep, node} (for rank selectors);
        ``parallel`` is the job's parallel sizes, written as torch_npu ``distributed_args``;
        ``session_per_unit`` records every unit of a window as its own session and folder
        (work that hops threads between units); ``save_path`` overrides the config's (roles)."""
        self.config = config
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        self.parallel, self._layout_of = parallel, layout_of
        self.unit, self.role, self.session_per_unit = unit, role, session_per_unit
        self.save_path = save_path or config.profile_save_path
        self.closed = False
        self.schedule = None
        self.manifest = None
        self.backend_name = None
        self._queue: Iterator[StepSchedule] = iter(())
        self._backend = None
        self._window = None
        self._windows_opened = 0
        self._state = "idle"
        self._session_thread = None
        self._lock = threading.Lock()
        self._flush = FlushOnExit(self.close, wait=self.wait)
        # end(n) leaves the profiler's step to begin(n + 1): a run that stops after n then
        # closes ProfilerStep#n, never a step opened for a unit that does not run.
        self._step_due = False
        self._watcher = None
        self._budget = None
        self._last = None
        self.selected_ranks = (ranks.resolve(config.profile_ranks, world_size, layout_of)
                               if config.profile else [])
        self.active = config.profile and rank in self.selected_ranks
        self.polling = config.profile and bool(config.profile_trigger_file)
        if self.active or self.polling:
            self.backend_name, _ = backends.choose(config)
        # Nothing to do per unit on this rank: no window, no trigger check.
        self.idle = not (self.active or self.polling)
        if self.idle:
            self.begin = self.end = self.step_begin = self.step_end = _nothing

    # -- start-up -----------------------------------------------------------------------------

    def arm(self, *, first: int = 1, last: Optional[int] = None,
            exit_interval: Optional[int] = None) -> None:
        """Check the windows, the save path and the disk budget before the first unit.

        ``first`` is the first unit this process runs (a resumed run's next iteration), ``last``
        the last one when it is known (``--train-iters``, ``total_steps``), else None."""
        self._last = last_iteration(first, last, exit_interval)
        plans = []
        if self.config.profile:
            plans = plan_windows(self.config, first_iteration=first, train_iters=last,
                                 exit_interval=exit_interval)
            announce_plan(self, plans)
        if self.active:
            check_save_path(self.save_path, self.rank, self.backend_name)
            self._budget = budget.RankBudget(self.config, self.backend_name, self.selected_ranks)
            # Without a known end, repeated windows are planned far ahead but only their first
            # is sure to happen: estimate that one; the live check bounds the rest.
            sure = plans if self._last is not None else plans[:1]
            self._budget.check_start(sure, self.save_path, self._selected_on_this_node())
        if not (self.active or self.polling):
            return
        self._queue = self._sessions(plans if self.active else [])
        self.schedule = next(self._queue, None)
        if self.active:
            self._create_manifest(first, last)
        if self.polling:
            self._watcher = trigger.TriggerWatcher(self.config.profile_trigger_file,
                                                   poll=self.config.profile_trigger_poll,
                                                   rank=self.rank, world_size=self.world_size,
                                                   report=self.report)
            self._watcher.set_state("armed")
        self._state = "armed" if (self.schedule or self.polling) else "done"
        self._flush.install()

    def _sessions(self, plans: Iterable[StepSchedule]) -> Iterator[StepSchedule]:
        """The sessions to open, in order: the windows, or each window's units one by one."""
        for plan in plans:
            if not self.session_per_unit:
                yield plan
                continue
            end = plan.end if plan.end is not None else OPEN_ENDED
            for n in range(plan.start, end):
                yield StepSchedule(skip_first=n, warmup=0, active=1)

    def describe(self) -> str:
        """How messages name this recorder: its role, else its unit."""
        return f"role {self.role!r}" if self.role else f"{self.unit.name} profiling"

    def _worker_name(self, schedule):
        """The NPU capture's name prefix: rank (and role); with a session per unit, the unit
        too (``rank0_req2``), so one rank's captures are told apart by name."""
        prefix = self.unit.prefix if self.session_per_unit else None
        return layout.session_worker_name(self.rank, self.role, prefix, schedule.start)

    def _selected_on_this_node(self):
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", 0) or 0)
        if not local_world or self.local_rank is None:
            return 1
        first = self.rank - self.local_rank
        return max(1, sum(1 for r in self.selected_ranks if first <= r < first + local_world))

    def _create_manifest(self, first=None, last=None):
        self.manifest = Manifest(
            layout.manifest_path(self.save_path, self.rank), rank=self.rank,
            world_size=self.world_size, local_rank=self.local_rank, backend=self.backend_name,
            config=self.config, selected_ranks=self.selected_ranks, parallel=self.parallel,
            versions=versions())
        data = self.manifest.data
        data["unit"], data["role"] = self.unit.name, self.role
        # Kept under the training names: check and older readers know them.
        data["first_iteration"], data["train_iters"] = first, last
        self.manifest.save()
        notes = list(self.config.warnings(role_driver=self.role is not None))
        ignored = backends.ignored_flags(self.backend_name, self.config)
        if ignored:
            notes.append(f"{', '.join(ignored)} only apply to the npu backend; the "
                         f"{self.backend_name} backend ignores them.")
        for note in notes:
            self.report("warning", "config", note)

    # -- per unit (hot path) ------------------------------------------------------------------

    def begin(self, n: int) -> None:
        """Unit ``n`` is about to run."""
        if self._watcher is not None and n % self.config.profile_trigger_poll == 0:
            self._guard("trigger", self._poll, n)
        state = self._state
        if state == "armed":
            if self.schedule is None or n < self.schedule.first_touched:
                return
            # Guarded like every backend call: building the profiler must not fail the work.
            self._guard("start", self._open_window, n)
        elif state == "running" and self._on_session_thread("step"):
            # Units the host skipped (Megatron's --iterations-to-skip) never reached the hook;
            # step the profiler past them so the schedule stays aligned with the numbers.
            self._guard("step", self._catch_up, n)

    def end(self, n: int) -> None:
        """Unit ``n`` finished."""
        if self._state != "running" or not self._on_session_thread("step"):
            return
        self._guard("step", self._advance, n)

    # The names the training code has always used.
    step_begin = begin
    step_end = end

    @property
    def recording(self) -> bool:
        """True while this recorder's session runs."""
        return self._state == "running"

    def range(self, name: str):
        """A labelled range inside the running session (``prefill``, ``stage:update``); a no-op
        context when nothing records on this thread."""
        if self._state != "running" or self._session_thread != threading.get_ident():
            return contextlib.nullcontext()
        return self._backend.range(name)

    def _on_session_thread(self, phase):
        if self._session_thread == threading.get_ident():
            return True
        self.report("error", phase, f"{self.describe()}: the profiler session was started on "
                                    f"thread {self._session_thread} and cannot be stepped or "
                                    f"stopped from thread {threading.get_ident()} (torch's "
                                    f"profilers record and stop on their own thread); call "
                                    f"begin/end on the thread that does the work")
        return False

    # -- sessions -----------------------------------------------------------------------------

    def _open_window(self, n):
        schedule = self.schedule
        if schedule.end is not None and n >= schedule.end:
            self.report("error", "start", f"{self.unit.plural} {schedule.start}-{schedule.end - 1} "
                                          f"were all skipped; nothing profiled")
            self._next_window()
            return
        if not self._claim_process():
            self._next_window()
            return
        if not self._budget_allows(schedule):
            self._release_process()
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
            metadata=self.parallel, report=self.report, worker=self._worker_name(schedule))
        window = self._window
        backend.on_saved = lambda: self._on_saved(backend, window)
        self._backend = backend
        self._state = "running"
        self._step_due = False
        self._session_thread = threading.get_ident()
        self.manifest.set_status("running")
        if self._watcher is not None:
            self._watcher.set_state("running", window=[schedule.start, schedule.end])
        self._guard("start", backend.start, n)

    def _claim_process(self):
        """Take the process's one running-session slot, or say who holds it."""
        holder = session_slot.PROCESS.claim(self)
        if holder is None:
            return True
        self.report("error", "start", f"{self.describe()}'s session at {self.unit.name} "
                                      f"{self.schedule.start} was not started: {holder.describe()}'s "
                                      f"session is still running in this process, and one "
                                      f"process runs one profiler at a time; give the two "
                                      f"windows different steps or stages")
        return False

    def _release_process(self):
        session_slot.PROCESS.release(self)

    def _window_dir(self, schedule):
        if not (self.session_per_unit or several_windows(self.config)):
            return self.save_path
        return layout.window_dir(self.save_path, schedule.start, schedule.end, self.unit.prefix)

    def _catch_up(self, n):
        while self._state == "running" and self._backend.step_num < n:
            if self._step_due:  # the step end(n - 1) left for this begin
                self._step_due = False
                self._backend.step()
            else:
                self._advance(self._backend.step_num, executed=False)  # a unit the host skipped

    def _advance(self, n, executed=True):
        if executed and n >= self.schedule.start:
            self._window["iterations_recorded"].append(n)
        end = self.schedule.end
        if end is not None and n + 1 >= end:
            self._backend.step()  # the schedule's last step: the trace is saved here
            self._finish_window()
            return
        self._step_due = True
        if self._budget is not None and self._budget.limit_gb is not None and executed:
            self._stop_if_over_budget()

    def _finish_window(self):
        # A signal whose flush ran inside this stop would stop the session a second time,
        # mid-export: hold it (and torch's worker-death errors) until the window is closed here.
        with final_flush():
            self._guard("stop", self._backend.stop)
            self._on_saved(self._backend, self._window)
            self._release_process()
            self._next_window()

    def _next_window(self):
        self.schedule = next(self._queue, None)
        self._state = "armed" if (self.schedule or self._watcher) else "done"

    def _on_saved(self, backend, window):
        """Called when a window's data reaches disk (from the export thread for async exports)."""
        with self._lock:
            if self.manifest is None:
                return
            for path in self.manifest.window_saved(window, backend.outputs(), backend.status()):
                log.info(f"wrote {path}", rank=self.rank)
            if self._watcher is not None and self._state != "running":
                status = window["status"]
                self._watcher.set_state(trigger.STATE_OF_STATUS.get(status, status),
                                        window=[window["start"], window["end"]])

    # -- budget -------------------------------------------------------------------------------

    def _used(self):
        """Bytes this rank's finished windows wrote (the manifest lists them)."""
        return self.manifest.used_bytes() if self.manifest is not None else 0

    def _budget_allows(self, schedule):
        if self._budget is None or self._budget.allows(schedule, self._used()):
            return True
        self.report("warning", "budget", self._budget.skip_reason(self.unit, schedule))
        return False

    def _stop_if_over_budget(self):
        if not self._budget.crossed(self._used() + budget.used_bytes(self._backend.outputs())):
            return
        recorded = self._window["iterations_recorded"][-1]
        self.report("warning", "budget", self._budget.stop_reason(self.unit, recorded))
        self._window["stopped_early"] = "--profile-max-gb"
        self._queue = iter(())
        self._finish_window()

    # -- on-demand trigger --------------------------------------------------------------------

    def _poll(self, n):
        request = self._watcher.check(n)  # every rank, same unit: one broadcast
        if request is None:
            return
        window = trigger.window_for(request, n, self._last)
        if window is None or self._state == "running":
            if self.rank == 0:
                self.report("warning", "trigger", f"request {request['id']} ignored at "
                                                  f"{self.unit.name} {n}: a window is still "
                                                  f"running or {self.unit.owner} ends now")
            return
        chosen = (ranks.resolve(ranks.parse_rank_tokens(request["ranks"]), self.world_size,
                                self._layout_of) if request["ranks"] else self.selected_ranks)
        sessions, (first, last) = trigger.requested_sessions(window, n, self.session_per_unit)
        if self.rank == 0:
            log.info(f"trigger {request['id']}: profiling rank(s) {short_ranks(chosen)} at "
                     f"{self.unit.plural} {first}-{last}")
        if self.rank in chosen:
            self._queue = iter(sessions)
            self.schedule = next(self._queue)
            self._state = "armed"

    # -- reporting ----------------------------------------------------------------------------

    def _guard(self, phase, func, *args):
        """Run a backend call; a profiler failure is reported and ends profiling on this rank."""
        try:
            return func(*args)
        except Exception as exc:  # noqa: BLE001 - the work must survive any profiler failure
            self.report("error", phase, f"{type(exc).__name__}: {exc}"
                                     f"{failure_fix(phase, self.unit.owner)}")
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
            self._release_process()
            self._state, self._queue = "done", iter(())
            return None

    def report(self, kind: str, phase: str, message: str) -> None:
        """Log on this rank and record in the manifest; never raises."""
        (log.error if kind == "error" else log.warning)(f"{phase}: {message}", rank=self.rank)
        if self.manifest is not None:
            self.manifest.record(kind, phase, message)

    # -- shutdown -----------------------------------------------------------------------------

    def close(self, reason: str = "finished", detail: Optional[str] = None,
              wait_timeout: Optional[float] = None, wait: bool = True) -> None:
        """Stop any running window, wait for its files, write the final manifest. Idempotent.

        ``wait=False`` leaves a background export running (its thread keeps the process alive
        and finishes the manifest); see ``wait()``."""
        if self.closed:
            return
        self.closed = True
        pending = False
        # Whatever ends the process (a job-wide signal killing the DataLoader workers, a second
        # signal, a closed console) must not abort the stop, the export or the manifest.
        with final_flush() as events:
            try:
                if self._state == "running":
                    self._close_running_window(reason)
                if wait and not self.wait(wait_timeout):
                    self.report("error", "stop", f"the trace was still being written when the "
                                                 f"process ended (waited at most {wait_timeout} "
                                                 f"s); it is incomplete")
                pending = not wait and not self.wait(0)
                if self.manifest is not None:
                    self._finish_manifest(reason, detail, events)
                if self._watcher is not None:
                    self._watcher.set_state("idle", reason=reason)
            finally:
                self._flush.uninstall(pending=pending)
                self._release_process()

    def _close_running_window(self, reason):
        recorded = self._window["iterations_recorded"]
        self._queue = iter(())
        if not (reason == "finished" and self.schedule.end is None):
            # Cut short: the window keeps what it recorded, and says so (check's `cut`). An
            # open-ended window that ends with its loop is whole.
            self._window["cut"] = {"reason": reason, "in_progress": self._in_progress()}
        if self._session_thread != threading.get_ident():
            # Stopping it here could crash the process; what it recorded is lost, and said so.
            self._state = "done"
            self._backend.abandon()
            self.report("error", "stop", f"{self.unit.owner} ended ({reason}) while "
                                         f"{self.describe()}'s session was running on thread "
                                         f"{self._session_thread}; it cannot be stopped from "
                                         f"thread {threading.get_ident()}, so {self.unit.plural} "
                                         f"{recorded or 'in progress'} were not written")
            return
        self._finish_window()
        if recorded:
            self.report("warning", "stop", f"{self.unit.owner} ended ({reason}) inside the "
                                           f"window; {self.unit.plural} {recorded} were recorded")
        else:
            self.report("warning", "stop", f"{self.unit.owner} ended ({reason}) before "
                                           f"{self.unit.name} {self._window['start']} completed; "
                                           f"nothing was profiled")

    def retract(self, n: int) -> None:
        """Unit ``n`` was begun but did not run (the loop that began it ended instead): its
        profiler step is left out of the trace (torch), or the manifest names it (``never_ran``)
        for check to discount (NPU, parsed later by torch_npu)."""
        if self._state != "running" or self._step_due or \
                self._session_thread != threading.get_ident():
            return
        try:
            if self._backend.step_num != n:
                return
        except Exception:  # noqa: BLE001 - a profiler that never started has no step
            return
        self._window["never_ran"] = n
        self._backend.never_ran = n

    def _in_progress(self):
        """The unit that had begun but not ended when the window was cut, if any."""
        if self._step_due or self._backend is None:
            return None
        try:
            n = self._backend.step_num
        except Exception:  # noqa: BLE001 - a profiler that never started has no step
            return None
        if n == self._window.get("never_ran") or n < self.schedule.start \
                or n in self._window["iterations_recorded"]:
            return None
        return n

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait for the last window's background export/parse; True when nothing is pending."""
        return self._backend is None or self._backend.wait(timeout)

    def _finish_manifest(self, reason, detail, events=None):
        self.manifest.data["exit"] = {"reason": reason, "detail": detail}
        happened = events.as_dict() if events is not None else {}
        if happened:
            self.manifest.data["exit_events"] = happened
        if not self._windows_opened and not self.polling:
            self.manifest.data["status"] = "incomplete"
            start = self.schedule.start if self.schedule else self.config.profile_step_start
            self.report("warning", "stop", f"{self.unit.owner} ended ({reason}) before "
                                           f"{self.unit.name} {start}; nothing was profiled")
        elif self._backend is not None:
            self._on_saved(self._backend, self._window)
        self.manifest.save()
