"""The window recorder: *when* sessions open and close, the engine every scenario shares
(DESIGN §6).

A recorder is told that unit ``n`` begins and ends (an iteration, a request, an RL step, an
engine step) and does the rest. It answers its three questions in three places: the plan
(``plan.py``: what, pure, also what ``show-config`` prints), the session (``session.py``: how one
window runs on its thread) and this module (when: arming, opening and closing sessions at unit
boundaries, the trigger poll, the live budget, the manifest, the flush on every way out). It
knows nothing of Megatron, requests or roles; drivers (``drivers/``) count the units::

    recorder = WindowRecorder(config, rank=r, world_size=w, unit=REQUEST)
    recorder.arm(first=1, last=None)          # windows checked, save path checked
    for n in units:                           # the scenario's numbering, 1-based
        recorder.begin(n); work(); recorder.end(n)
    recorder.close("finished")                # in a finally: always flushes

On a rank that does not record, ``begin``/``end`` are a no-op function and nothing else happens.
A backend profiler is created only when a window (or its warm-up unit) arrives and is stopped
right after it. With ``--profile-trigger-file`` every rank also takes part in the trigger check
every K units.
"""

import contextlib
import enum
import os
import threading
from typing import Any, Callable, ContextManager, Iterator, List, Optional, Tuple

from . import backends, log, ranks, trigger
from .config import ProfilerConfig
from .environment import versions
from .exits import FlushOnExit, final_flush
from .layout import manifest_path
from .manifest import Manifest, PlannedWindow, claim_for_recorder, release_for_recorder
from .notices import announce_plan, session_cut_words, short_ranks, window_cut_words
from .plan import LayoutOf, Plan, make_plan
from .session import PROCESS, Session, reporting
from .startup import check_save_path
from .units import ITERATION, Unit
from .window import StepSchedule

# How long close() from another thread waits for a running session's own thread to stop it at
# its next unit boundary or range (a server's request thread, when SIGTERM or the exit flush
# runs on the main thread), when the caller gives no bound of its own.
STOP_GRACE_S = 5.0
_NO_RANGE = contextlib.nullcontext()


Failure = Tuple[str, Optional[str]]  # (reason, detail) as exits.exit_reason gives them


class State(enum.Enum):
    IDLE = "idle"        # not armed, or nothing to do on this rank
    ARMED = "armed"      # waiting for the next session's first unit (or a trigger)
    RUNNING = "running"  # a session records
    DONE = "done"        # nothing more will be recorded


def _nothing(n: int, failure: Optional[Failure] = None) -> None:
    return None


def _last(end: Optional[int]) -> str:
    return "" if end is None else str(end - 1)


class WindowRecorder:
    def __init__(self, config: ProfilerConfig, *, rank: int = 0, world_size: int = 1,
                 local_rank: Optional[int] = None, layout_of: Optional[LayoutOf] = None,
                 parallel: Optional[dict] = None, unit: Unit = ITERATION,
                 role: Optional[str] = None, session_per_unit: bool = False,
                 save_path: Optional[str] = None,
                 on_final_manifest: Optional[Callable[[Manifest], None]] = None):
        """``layout_of`` maps global rank -> {tp, pp, dp, cp, ep, node} (for rank selectors);
        ``parallel`` is the job's parallel sizes, written as torch_npu ``distributed_args``;
        ``session_per_unit`` records every unit of a window as its own session and folder
        (work that hops threads between units); ``save_path`` overrides the config's (roles);
        ``on_final_manifest(manifest)`` adds what only the driver knows, whoever closes."""
        self.config, self.local_rank, self.parallel = config, local_rank, parallel
        self._layout_of = layout_of
        self.plan: Plan = make_plan(config, unit=unit, rank=rank, world_size=world_size,
                                    layout_of=layout_of, role=role,
                                    session_per_unit=session_per_unit, save_path=save_path)
        self.closed = False
        self.schedule: Optional[StepSchedule] = None  # the next (or running) session's
        self.manifest: Optional[Manifest] = None
        self.backend_name: Optional[str] = None
        self._queue: Iterator[StepSchedule] = iter(())
        self._session: Optional[Session] = None
        self._planned: Optional[PlannedWindow] = None  # per-unit sessions: the window's record
        self._windows_opened = 0
        self._state = State.IDLE
        self._lock = threading.Lock()
        self._flush = FlushOnExit(self.close, wait=self.wait)
        self._watcher: Optional[trigger.TriggerWatcher] = None
        self._budget: Any = None
        self._raw_last: Optional[int] = None
        self._stop_wanted: Optional[str] = None  # close() asked from another thread: the reason
        self._stopped = threading.Event()  # set when a session ends, on whichever thread
        self._requested: List[StepSchedule] = []  # windows a trigger request added
        self._last_begun: Optional[int] = None
        self._failure: Optional[Failure] = None  # how the last failed unit ended
        self._on_final_manifest = on_final_manifest
        if not self.plan.idle:
            self.backend_name, _ = backends.choose(config)
        self.idle = self.plan.idle
        if self.idle:  # the null object of STYLE: the calls become the cheapest thing that works
            self.begin = self.end = self.step_begin = self.step_end = _nothing  # type: ignore

    # -- what the plan says ---------------------------------------------------------------------

    rank = property(lambda self: self.plan.rank)
    world_size = property(lambda self: self.plan.world_size)
    unit = property(lambda self: self.plan.unit)
    role = property(lambda self: self.plan.role)
    session_per_unit = property(lambda self: self.plan.session_per_unit)
    save_path = property(lambda self: self.plan.save_path)
    active = property(lambda self: self.plan.active)
    polling = property(lambda self: self.plan.polling)
    selected_ranks = property(lambda self: list(self.plan.selected_ranks))
    windows_opened = property(lambda self: self._windows_opened)

    def describe(self) -> str:
        """How messages name this recorder: its role, else its unit."""
        return f"role {self.role!r}" if self.role else f"{self.unit.name} profiling"

    @property
    def recording(self) -> bool:
        """True while this recorder's session runs."""
        return self._state is State.RUNNING

    # -- start-up -------------------------------------------------------------------------------

    def arm(self, *, first: int = 1, last: Optional[int] = None,
            exit_interval: Optional[int] = None) -> None:
        """Check the windows, the save path and the disk budget before the first unit.

        ``first`` is the first unit this process runs (a resumed run's next iteration), ``last``
        the last one when it is known (``--train-iters``, ``total_steps``), else None."""
        self.plan = plan = self.plan.with_windows(first=first, last=last,
                                                  exit_interval=exit_interval)
        self._raw_last = last
        if self.config.profile:
            announce_plan(plan)
        if plan.active:
            check_save_path(plan.save_path, plan.rank, self.backend_name)
            self._budget = plan.check_budget(self.backend_name,
                                             plan.selected_on_node(self.local_rank))
        if plan.idle:
            return
        self._queue = plan.sessions() if plan.active else iter(())
        self.schedule = next(self._queue, None)
        if plan.active:
            self._create_manifest(first, last)
        if plan.polling:
            self._watcher = trigger.TriggerWatcher(self.config.profile_trigger_file,
                                                   poll=self.config.profile_trigger_poll,
                                                   rank=plan.rank, world_size=plan.world_size,
                                                   report=self.report)
            self._watcher.set_state("armed")
        self._state = State.ARMED if (self.schedule or plan.polling) else State.DONE
        self._flush.install()

    def _create_manifest(self, first: Optional[int] = None, last: Optional[int] = None) -> None:
        plan = self.plan
        claim_for_recorder(manifest_path(plan.save_path, plan.rank))
        self.manifest = Manifest(
            manifest_path(plan.save_path, plan.rank), rank=plan.rank,
            world_size=plan.world_size, local_rank=self.local_rank, backend=self.backend_name,
            config=self.config, selected_ranks=self.selected_ranks, parallel=self.parallel,
            versions=versions())
        self.manifest.describe_run(unit=plan.unit.name, role=plan.role, first=first, last=last)
        notes = list(self.config.warnings(role_driver=plan.role is not None))
        ignored = backends.ignored_flags(self.backend_name, self.config)
        if ignored:
            notes.append(f"{', '.join(ignored)} only apply to the npu backend; the "
                         f"{self.backend_name} backend ignores them.")
        for note in notes:
            self.report("warning", "config", note)

    # -- per unit (hot path) --------------------------------------------------------------------

    def begin(self, n: int) -> None:
        """Unit ``n`` is about to run."""
        self._last_begun = n
        if self._watcher is not None and n % self.config.profile_trigger_poll == 0:
            with reporting(self.report, "trigger", self.unit.owner):
                self._poll(n)
        state = self._state
        if state is State.ARMED:
            self._open_due(n)
        elif state is State.RUNNING and self._on_session_thread("step"):
            session = self._session
            if self._stop_wanted is not None:
                self._stop_here(None)
                return
            ended = False
            with session.failing_safely("step"):
                ended = session.catch_up(n)
            if ended:
                self._finish_window()  # the window ended among units the host skipped

    def end(self, n: int, failure: Optional[Failure] = None) -> None:
        """Unit ``n`` finished; ``failure`` (reason, detail): an exception ended it, so it is not
        a recorded unit and its window is cut (what ran before it stays)."""
        if failure is not None:
            self._failure = failure
        if self._state is not State.RUNNING or not self._on_session_thread("step"):
            return
        session = self._session
        if failure is not None or self._stop_wanted is not None:
            self._stop_here(failure)
            return
        last = False
        with session.failing_safely("step"):
            if self._planned is not None and n >= session.schedule.start:
                self._planned.record(n)
            last = session.unit_ended(n)
        if self._state is not State.RUNNING:
            return  # the step failed: profiling ended here
        if last:
            self._finish_window()
        elif self._budget is not None and self._budget.limit_gb is not None:
            self._stop_if_over_budget()

    # The names the training code has always used.
    step_begin = begin
    step_end = end

    def range(self, name: str) -> ContextManager[Any]:
        """A labelled range inside the running session (``prefill``, ``stage:update``); a no-op
        context when nothing records on this thread."""
        session = self._session
        if self._state is not State.RUNNING or session is None:
            return _NO_RANGE
        if self._stop_wanted is not None and session.on_own_thread:
            self._stop_here(None)
            return _NO_RANGE
        return session.range(name)

    def retract(self, n: int) -> None:
        """Unit ``n`` was begun but did not run (the loop that began it ended instead): its
        profiler step is left out of the trace (torch), or the manifest names it (``never_ran``)
        for check to discount (NPU, parsed later by torch_npu)."""
        if self._state is State.RUNNING:
            self._session.retract(n)

    def _on_session_thread(self, phase: str) -> bool:
        if self._session.on_own_thread:
            return True
        self.report("error", phase, f"{self.describe()}: the profiler session was started on "
                                    f"thread {self._session.thread} and cannot be stepped or "
                                    f"stopped from thread {threading.get_ident()} (torch's "
                                    f"profilers record and stop on their own thread); call "
                                    f"begin/end on the thread that does the work")
        return False

    # -- opening and closing sessions -----------------------------------------------------------

    def _open_due(self, n: int) -> None:
        """Open the session unit ``n`` belongs to, passing over sessions the host never reached
        (a resumed role, a step number skipped): what does run is recorded."""
        while self.schedule is not None and self.schedule.end is not None \
                and n >= self.schedule.end:
            self._pass_over(self.schedule)
            self._next_window()
        schedule = self.schedule
        if schedule is None or self._state is not State.ARMED or n < schedule.first_touched:
            return
        if not self._claim_process(schedule, n):
            self._next_window()
            return
        if self._budget is not None and not self._budget.allows(schedule, self._used()):
            self.report("warning", "budget", self._budget.skip_reason(self.unit, schedule))
            PROCESS.release(self)
            self._state, self._queue = State.DONE, iter(())
            return
        if self.manifest is None:
            self._create_manifest()  # a trigger request chose a rank the plan did not
        self._planned_for(schedule.start)
        plan = self.plan
        directory = plan.window_dir(schedule)
        window = self.manifest.add_window(schedule.start, schedule.end,
                                          os.path.relpath(directory, plan.save_path))
        self._windows_opened += 1
        session = Session(schedule=schedule, window=window, backend_name=self.backend_name,
                          backend_args=dict(config=self.config, rank=plan.rank,
                                            save_dir=directory, metadata=self.parallel,
                                            worker=plan.worker_name(schedule)),
                          report=self.report, owner=self.unit.owner,
                          on_saved=self._on_saved, on_failure=self._gave_up)
        self._session, self._state, self._stop_wanted = session, State.RUNNING, None
        self._stopped.clear()
        self.manifest.set_status("running")
        if self._watcher is not None:
            self._watcher.set_state("running", window=[schedule.start, schedule.end])
        with session.failing_safely("start"):
            session.start(n)

    def _pass_over(self, schedule: StepSchedule) -> None:
        """A session whose units all passed before the unit now beginning."""
        planned = self._planned_for(schedule.start)
        if planned is None:
            self.report("error", "start", f"{self.unit.plural} {schedule.start}-"
                                          f"{schedule.end - 1} were all skipped; nothing "
                                          f"profiled")
            return
        if not planned.data["skipped"]:
            self.report("warning", "start", f"{self.unit.name} {schedule.start} of the window "
                                            f"{planned.start}-{_last(planned.end)} never began "
                                            f"here (started later, or the number was skipped); "
                                            f"the {self.unit.plural} that do run are recorded")
        planned.skip([schedule.start])
        self._unit_session_over(schedule)

    def _planned_for(self, start: int) -> Optional[PlannedWindow]:
        """With a session per unit, the planned window the session at ``start`` belongs to (its
        record in the manifest is opened here), so that a window the run leaves half done is
        `cut`, and a refused or skipped unit is a gap, not a set of valid sessions."""
        if not self.session_per_unit or self.manifest is None:
            return None
        current = self._planned
        if current is not None and current.start <= start and (
                current.end is None or start < current.end):
            return current
        window = next((w for w in [*self.plan.windows, *self._requested]
                       if w.start <= start and (w.end is None or start < w.end)), None)
        if window is None:
            return None
        self._planned = self.manifest.add_planned(window.start, window.end)
        return self._planned

    def _unit_session_over(self, schedule: StepSchedule) -> None:
        """A unit's session ended, was passed over or refused: the last one ends its window."""
        planned = self._planned
        if planned is not None and planned.status == "running" and planned.end is not None \
                and schedule.end is not None and schedule.end >= planned.end:
            planned.finish()
            self.manifest.save()

    def _claim_process(self, schedule: StepSchedule, n: int) -> bool:
        """Take the process's one running-session slot, or say who holds it."""
        holder = PROCESS.claim(self)
        if holder is None:
            return True
        planned = self._planned_for(schedule.start)
        if planned is not None:
            planned.refuse(n)
            self._unit_session_over(schedule)
        self.report("error", "start", f"{self.describe()}'s session at {self.unit.name} "
                                      f"{schedule.start} was not started: "
                                      f"{holder.describe()}'s session is still running in this "
                                      f"process, and one process runs one profiler at a time; "
                                      f"give the two windows different steps or stages")
        return False

    def _finish_window(self) -> None:
        session = self._session
        session.stop()
        PROCESS.release(self)
        self._stopped.set()
        self._unit_session_over(session.schedule)
        if self._state is State.RUNNING:
            self._next_window()

    def _next_window(self) -> None:
        self.schedule = next(self._queue, None)
        self._state = State.ARMED if (self.schedule or self._watcher) else State.DONE

    def _gave_up(self, session: Session) -> None:
        """A profiler call failed: profiling ends on this rank (the work goes on)."""
        if session.backend is None:
            self.manifest.fail_window(session.window)  # it could not even be built
        PROCESS.release(self)
        self._stopped.set()
        self._state, self._queue = State.DONE, iter(())

    def _stop_here(self, failure: Optional[Failure]) -> None:
        """On the session's own thread: stop the running session now, its window cut (its unit
        failed, or close() was asked from another thread). What ran before stays recorded."""
        session = self._session
        reason = failure[0] if failure is not None else self._stop_wanted or "stopped"
        in_progress = session.in_progress()
        session.window.mark_cut(reason, in_progress)
        if self._planned is not None and self._planned.status == "running":
            self._planned.mark_cut(reason, in_progress)
        if self._stop_wanted is not None:
            self._queue = iter(())
            self._state = State.DONE  # the run is ending: no session after this one
        self._finish_window()
        if failure is not None:
            what = failure[1] or failure[0]
            self.report("warning", "stop", f"{self.unit.name} {in_progress} ended early ({what});"
                                           f" its session was stopped and kept, marked cut")

    def _on_saved(self, session: Session) -> None:
        """A window's data reached disk (from the export thread for async exports)."""
        with self._lock:
            if self.manifest is None:
                return
            window = session.window
            for path in self.manifest.window_saved(window, session.outputs(), session.status()):
                log.info(f"wrote {path}", rank=self.rank)
            if self._watcher is not None and self._state is not State.RUNNING:
                status = window.status
                self._watcher.set_state(trigger.STATE_OF_STATUS.get(status, status),
                                        window=[window.start, window.end])

    # -- budget ---------------------------------------------------------------------------------

    def _used(self) -> int:
        """Bytes this rank's finished windows wrote (the manifest lists them)."""
        return self.manifest.used_bytes() if self.manifest is not None else 0

    def _stop_if_over_budget(self) -> None:
        from .budget import used_bytes

        session = self._session
        if not self._budget.crossed(self._used() + used_bytes(session.outputs())):
            return
        recorded = session.window.recorded[-1]
        self.report("warning", "budget", self._budget.stop_reason(self.unit, recorded))
        session.window.mark_stopped_early("--profile-max-gb")
        self._queue = iter(())
        self._finish_window()

    # -- on-demand trigger ----------------------------------------------------------------------

    def _poll(self, n: int) -> None:
        request = self._watcher.check(n)  # every rank, same unit: one broadcast
        if request is None:
            return
        window = trigger.window_for(request, n, self.plan.last)
        if window is None or self._state is State.RUNNING:
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
            self._requested = [StepSchedule(skip_first=first, warmup=0,
                                            active=last - first + 1)]
            self._queue = iter(sessions)
            self.schedule = next(self._queue)
            self._state = State.ARMED

    # -- reporting ------------------------------------------------------------------------------

    def report(self, kind: str, phase: str, message: str) -> None:
        """Log on this rank and record in the manifest; never raises."""
        (log.error if kind == "error" else log.warning)(f"{phase}: {message}", rank=self.rank)
        if self.manifest is not None:
            self.manifest.record(kind, phase, message)

    # -- shutdown -------------------------------------------------------------------------------

    def close(self, reason: str = "finished", detail: Optional[str] = None,
              wait_timeout: Optional[float] = None, wait: bool = True) -> None:
        """Stop any running window, wait for its files, write the final manifest. Idempotent.

        ``wait=False`` leaves a background export running (its thread keeps the process alive
        and finishes the manifest); see ``wait()``."""
        if self.closed:
            return
        self.closed = True
        if reason == "process exit" and self._failure is not None:
            # The exit flush does not know how the process ended; the unit that failed does.
            reason, detail = self._failure
        pending = False
        # Whatever ends the process (a job-wide signal killing the DataLoader workers, a second
        # signal, a closed console) must not abort the stop, the export or the manifest.
        with final_flush() as events:
            try:
                if self._state is State.RUNNING:
                    self._close_running_window(reason, wait_timeout)
                self._close_planned(reason)
                if wait and not self.wait(wait_timeout):
                    self.report("error", "stop", f"the trace was still being written when the "
                                                 f"process ended (waited at most {wait_timeout} "
                                                 f"s); it is incomplete")
                pending = not wait and not self.wait(0)
                if self.manifest is not None:
                    self._finish_manifest(reason, detail, events.as_dict())
                if self._watcher is not None:
                    self._watcher.set_state("idle", reason=reason)
            finally:
                self._flush.uninstall(pending=pending)
                PROCESS.release(self)
                self._state = State.DONE
                if self.manifest is not None:
                    release_for_recorder(manifest_path(self.save_path, self.rank))

    def _close_running_window(self, reason: str, wait_timeout: Optional[float]) -> None:
        session = self._session
        self._queue = iter(())
        if not session.on_own_thread:
            # Stopping it here could crash the process: ask its own thread to stop it at its
            # next unit boundary or range, and wait for that (bounded).
            self._stop_wanted = reason
            grace = STOP_GRACE_S if wait_timeout is None else min(wait_timeout, STOP_GRACE_S)
            if self._stopped.wait(grace):
                return
            self._state = State.DONE
            session.abandon()
            recorded = list(session.window.recorded)
            self.report("error", "stop", f"{self.unit.owner} ended ({reason}) while "
                                         f"{self.describe()}'s session was running on thread "
                                         f"{session.thread}; it cannot be stopped from thread "
                                         f"{threading.get_ident()} and its own thread did not "
                                         f"stop it within {grace:g} s, so {self.unit.plural} "
                                         f"{recorded or 'in progress'} were not written")
            return
        if not (reason == "finished" and session.schedule.end is None):
            # Cut short: the window keeps what it recorded, and says so (check's `cut`). An
            # open-ended window that ends with its loop is whole.
            session.window.mark_cut(reason, session.in_progress())
        self._finish_window()
        if self._planned is None:
            window = session.window
            self.report("warning", "stop", session_cut_words(
                self.unit, reason, window.recorded, window.start, bool(session.outputs())))

    def _close_planned(self, reason: str) -> None:
        """A planned window of per-unit sessions still open when the run ends is cut, and the
        log says what is on disk (the manifest's record, not the plan's arithmetic)."""
        planned = self._planned
        if planned is None or planned.status == "complete":
            return
        if planned.status == "running":
            if planned.end is None and reason == "finished":
                planned.finish()  # open-ended: whole when its loop ends
                self.manifest.save()
                return
            session = self._session
            cut = session.window.data.get("cut", {}) if session is not None else {}
            planned.mark_cut(reason, cut.get("in_progress"))
            self.manifest.save()
        self.report("warning", "stop", window_cut_words(
            self.unit, planned.data["cut"]["reason"], self._last_begun,
            (planned.start, planned.end), planned.recorded))

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait for the last window's background export/parse; True when nothing is pending."""
        return self._session is None or self._session.wait(timeout)

    def cut_window(self) -> Optional[PlannedWindow]:
        """The planned window of per-unit sessions that the run left cut, if any."""
        planned = self._planned
        return planned if planned is not None and planned.status == "cut" else None

    def _finish_manifest(self, reason: str, detail: Optional[str], events: dict) -> None:
        manifest = self.manifest
        manifest.set_exit(reason, detail, events)
        if self._on_final_manifest is not None:
            self._on_final_manifest(manifest)
        if not self._windows_opened and not self.polling:
            manifest.mark_nothing_profiled()
            planned = self.plan.windows
            start = self.schedule.start if self.schedule else (
                planned[0].start if planned else self.config.profile_step_start)
            self.report("warning", "stop", f"{self.unit.owner} ended ({reason}) before "
                                           f"{self.unit.name} {start}; nothing was profiled")
        elif self._session is not None:
            self._on_saved(self._session)
        manifest.save()
