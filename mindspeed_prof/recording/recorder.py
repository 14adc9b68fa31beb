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
right after it. With ``--profile-trigger-file`` or a capture rule (``--profile-on-*``) every
rank also takes part in the poll every K units (``polling.py``).
"""

import contextlib
import dataclasses
import threading
from typing import Any, Callable, ContextManager, Iterator, Optional

from .. import backends, log
from ..control import trigger
from ..control.captures import CapturePoll
from ..config.profiler_config import ProfilerConfig
from .exits import FlushOnExit, SignalSafeLock, final_flush, signal_safe
from .manifest import Manifest, open_manifest
from .notices import announce_plan, config_notes, wrong_thread_words
from .on_demand import OnDemandWindows
from .plan import LayoutOf, Plan, make_plan
from .polling import RecorderPolling
from .session import PROCESS, Session, reporting
from .startup import check_rank
from .shutdown import Failure, RecorderShutdown, State
from .unit_windows import UnitWindows
from ..config.units import ITERATION, Unit
from ..config.window import StepSchedule

_NO_RANGE = contextlib.nullcontext()

def _nothing(n: int, failure: Optional[Failure] = None) -> None:
    return None


class WindowRecorder(RecorderPolling, RecorderShutdown, OnDemandWindows):
    def __init__(self, config: ProfilerConfig, *, rank: int = 0, world_size: int = 1,
                 local_rank: Optional[int] = None, layout_of: Optional[LayoutOf] = None,
                 parallel: Optional[dict] = None, unit: Unit = ITERATION,
                 role: Optional[str] = None, session_per_unit: bool = False,
                 save_path: Optional[str] = None, own_folders: bool = False,
                 on_final_manifest: Optional[Callable[[Manifest], None]] = None) -> None:
        """``layout_of`` maps global rank -> {tp, pp, dp, cp, ep, node} (for rank selectors);
        ``parallel`` is the job's parallel sizes, written as torch_npu ``distributed_args``;
        ``session_per_unit`` records every unit of a window as its own session and folder
        (work that hops threads between units); ``own_folders``: every window in its own folder
        (windows asked for over HTTP); ``save_path`` overrides the config's (roles);
        ``on_final_manifest(manifest)`` adds what only the driver knows, whoever closes."""
        self.config, self.local_rank, self.parallel = config, local_rank, parallel
        self._layout_of = layout_of
        self.plan: Plan = make_plan(config, unit=unit, rank=rank, world_size=world_size,
                                    layout_of=layout_of, role=role,
                                    session_per_unit=session_per_unit, save_path=save_path,
                                    own_folders=own_folders)
        self.closed = False
        self.schedule: Optional[StepSchedule] = None  # the next (or running) session's
        self.manifest: Optional[Manifest] = None
        self.backend_name = ""  # chosen below, once, where this rank has anything to do
        self._queue: Iterator[StepSchedule] = iter(())
        self._session: Optional[Session] = None
        self._windows_opened = 0
        self._state = State.IDLE
        self._lock = SignalSafeLock()  # a window saved from the export thread, or a signal's flush
        self._flush = FlushOnExit(self.close, wait=self.wait)
        self._watcher: Optional[trigger.TriggerWatcher] = None
        self._poller: Optional[CapturePoll] = None  # the trigger's and the capture rules' poll
        self._budget: Any = None
        self._stop_wanted: Optional[str] = None  # close() asked from another thread: the reason
        self._stopped = threading.Event()  # set when a session ends, on whichever thread
        # Per-unit sessions: how far each planned window got (None for a session per window).
        self._units: Optional[UnitWindows] = None
        self._last_begun: Optional[int] = None
        self._failure: Optional[Failure] = None  # how the last failed unit ended
        self._on_final_manifest = on_final_manifest
        self._demand, self._origin = None, {"by": "flags"}  # windows asked for at run time
        if not self.plan.idle:
            self.backend_name, _ = backends.choose(config)
        self.idle = self.plan.idle
        if self.idle:  # the null object of STYLE: the calls become the cheapest thing that works
            self.begin = self.end = self.step_begin = self.step_end = _nothing  # type: ignore
        else:
            self._time_units()

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
            exit_interval: Optional[int] = None, planned: bool = True) -> None:
        """Check the windows, the save path and the disk budget before the first unit.

        ``first`` is the first unit this process runs (a resumed run's next iteration), ``last``
        the last one when it is known (``--train-iters``, ``total_steps``), else None.
        ``planned=False``: no window was asked for (a server waiting for an HTTP start)."""
        plan = self.plan.with_windows(first=first, last=last, exit_interval=exit_interval)
        self.plan = plan = plan if planned else dataclasses.replace(plan, windows=())
        if self.config.profile:
            announce_plan(plan)  # rank 0 only
        if plan.active:
            check_rank(self.config, plan.rank, plan.save_path, self.backend_name)
            self._budget = plan.check_budget(self.backend_name,
                                             plan.selected_on_node(self.local_rank))
        if plan.idle:
            return
        self._queue = plan.sessions() if plan.active else iter(())
        if plan.session_per_unit:
            self._units = UnitWindows(plan.unit, plan.windows, self.report)
        self.schedule = next(self._queue, None)
        if plan.active:
            self._create_manifest(first, last)
        if plan.polling:
            self._arm_poll(plan)
        self._state = State.ARMED if (self.schedule or plan.polling) else State.DONE
        self._flush.install()

    def _create_manifest(self, first: Optional[int] = None, last: Optional[int] = None) -> None:
        self.manifest = open_manifest(self.plan, self.backend_name, local_rank=self.local_rank,
                                      parallel=self.parallel, first=first, last=last)
        for note in config_notes(self.plan, self.backend_name):
            self.report("warning", "config", note)

    # -- per unit (hot path) --------------------------------------------------------------------

    def begin(self, n: int) -> None:
        """Unit ``n`` is about to run."""
        self._last_begun = n
        if self._poller is not None and n % self.config.profile_trigger_poll == 0:
            with reporting(self.report, "trigger", self.unit.owner):
                self._poll(n)
        # A signal's flush reads what opening a session writes: it waits for the unit's
        # boundary to be crossed whole (the poll above may wait on other ranks: not inside).
        with signal_safe:
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

    def end(self, n: int, failure: Optional[Failure] = None, *, fatal: bool = True) -> None:
        """Unit ``n`` finished; ``failure`` (reason, detail): an exception ended it, so it is not
        a recorded unit and its window is cut (what ran before it stays). ``fatal=False``: a cut
        that cannot be how the process ends (a request whose caller left its stream unread)."""
        if failure is not None and fatal:
            self._failure = failure
        with signal_safe:  # a signal's flush waits for the unit's end to be recorded whole
            if self._state is State.RUNNING and self._on_session_thread("step"):
                self._end_running(n, failure)

    def _end_running(self, n: int, failure: Optional[Failure]) -> None:
        session = self._session
        if failure is not None or self._stop_wanted is not None:
            self._stop_here(failure)
            return
        # The torch profiler saves the trace inside the step that ends the window: a signal's
        # flush landing there or before the stop would cut a window that is whole (held).
        with final_flush() if session.ends_window(n) else contextlib.nullcontext():
            last = False
            with session.failing_safely("step"):
                if self._units is not None and n >= session.schedule.start:
                    self._units.record(n)
                last = session.unit_ended(n)
            if self._state is not State.RUNNING:
                return  # the step failed: profiling ended here
            if last:
                self._finish_window()
                self._say_window_end(session)
            elif self._budget is not None and self._budget.limit_gb is not None:
                self._stop_if_over_budget()

    def _say_window_end(self, session: Optional[Session]) -> None:
        """On the first profiled rank (rank 0 when it records): the seconds the window's end
        added to its last unit, which the host's log shows 3-7x the others with no word why."""
        plan = self.plan
        if session is not None and self._units is None and plan.selected_ranks \
                and plan.rank == min(plan.selected_ranks):
            log.info(session.ending_words(plan.unit), rank=plan.rank)

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
            with signal_safe:
                if self._state is State.RUNNING:
                    self._stop_here(None)
            return _NO_RANGE
        return session.range(name)

    def retract(self, n: int) -> None:
        """Unit ``n`` was begun but did not run (the loop that began it ended instead): its
        profiler step is left out of the trace (torch), or the manifest names it (``never_ran``)
        for check to discount (NPU, parsed later by torch_npu)."""
        with signal_safe:
            if self._state is State.RUNNING:
                self._session.retract(n)

    def _on_session_thread(self, phase: str) -> bool:
        if self._session.on_own_thread:
            return True
        self.report("error", phase, wrong_thread_words(self.describe(), self._session.thread))
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
        if self._units is not None:
            self._units.for_session(self.manifest, schedule.start)
        self._windows_opened += 1
        session = Session.for_plan(self.plan, schedule, self.manifest, self.backend_name,
                                   self.parallel, self.report, on_saved=self._on_saved,
                                   on_failure=self._gave_up, directory=self._window_dir(schedule))
        self._say_why(session)
        self._window_opened(session)
        self._session, self._state, self._stop_wanted = session, State.RUNNING, None
        self._stopped.clear()
        self.manifest.set_status("running")
        if self._watcher is not None:
            self._watcher.set_state("running", window=[schedule.start, schedule.end])
        with session.failing_safely("start"):
            session.start(n)

    def _pass_over(self, schedule: StepSchedule) -> None:
        """A session whose units all passed before the unit now beginning."""
        if self._units is not None and self._units.passed_over(self.manifest, schedule):
            return
        self.report("error", "start", f"{self.unit.plural} {schedule.start}-{schedule.end - 1} "
                                      f"were all skipped; nothing profiled")

    def _claim_process(self, schedule: StepSchedule, n: int) -> bool:
        """Take the process's one running-session slot, or say who holds it."""
        holder = PROCESS.claim(self)
        if holder is None:
            return True
        if self._units is not None:
            self._units.refused(self.manifest, schedule, n)
        self.report("error", "start", f"the session of {self.describe()} at {self.unit.name} "
                                      f"{schedule.start} was not started: the session of "
                                      f"{holder.describe()} is still running in this process, "
                                      f"and one process runs one profiler at a time; give the "
                                      f"two windows different steps or stages")
        return False

    # -- reporting ------------------------------------------------------------------------------

    def report(self, kind: str, phase: str, message: str) -> None:
        """Log on this rank and record in the manifest; never raises."""
        (log.error if kind == "error" else log.warning)(f"{phase}: {message}", rank=self.rank)
        if self.manifest is not None:
            self.manifest.record(kind, phase, message)
