"""The window recorder: *when* sessions open and close, the engine every scenario shares
(DESIGN §6).

A recorder is told that unit ``n`` begins and ends (an iteration, a request, an RL step, an
engine step) and does the rest. It answers its three questions in three places: the plan
(``plan.py``: what, pure, also what ``show-config`` prints), the session (``session.py``: how one
window runs on its thread) and this module (when: arming, opening and closing sessions at unit
boundaries, the live budget, the manifest, the flush on every way out). It knows nothing of
Megatron, requests or roles; drivers (``drivers/``) count the units::

    recorder = WindowRecorder(config, rank=r, world_size=w, unit=REQUEST)
    recorder.arm(first=1, last=None)          # windows checked, save path checked
    for n in units:                           # the scenario's numbering, 1-based
        recorder.begin(n); work(); recorder.end(n)
    recorder.close("finished")                # in a finally: always flushes

It is made of parts that own their state: the sessions still to open (``window_queue.py``),
the one session and its state (``window_slot.py``), the disk budget (``window_budget.py``),
the poll of the trigger and the capture rules (``polling.py``) and the window asked for at run
time (``on_demand.py``); how it ends is ``shutdown.py``. Every window no plan asked for enters
through one door, ``request_window(n, request)``: an HTTP start, a trigger request, a capture.

On a rank that does not record, ``begin``/``end`` are a no-op function and nothing else happens.
A backend profiler is created only when a window (or its warm-up unit) arrives and is stopped
right after it. With ``--profile-trigger-file`` or a capture rule (``--profile-on-*``) every
rank also takes part in the poll every K units.
"""

import contextlib
import dataclasses
import sys
from typing import Any, Callable, ContextManager, Dict, Optional

from .. import backends, log
from ..config.profiler_config import ProfilerConfig
from ..config.units import ITERATION, Unit
from ..config.window import OPEN_ENDED, StepSchedule, WindowRequest
from ..layout import manifest_path
from . import shutdown
from .exits import (FlushOnExit, SignalSafeLock, final_flush, guard_children, hand_on_children,
                    signal_safe)
from .flush import guarded
from .manifest import Manifest, open_manifest, release_for_recorder
from .manifest_entries import PlannedWindow
from .notices import announce_plan, config_notes, wrong_thread_words
from .on_demand import STOP, AskedWindows
from .plan import LayoutOf, Plan, make_plan
from .polling import RecorderPoll, time_units
from .session import PROCESS, Session, reporting
from .startup import check_rank
from .unit_windows import UnitWindows
from .window_budget import WindowBudget
from .window_queue import WindowQueue
from .window_slot import Failure, State, WindowSlot

__all__ = ["Failure", "State", "WindowRecorder"]

_NO_RANGE = contextlib.nullcontext()


def _nothing(n: int, failure: Optional[Failure] = None) -> None:
    return None


class WindowRecorder:
    # Why nothing was profiled, in a driver's words (an RL stage that never ran), said at close
    # instead of "ended before {unit} N", which only the recorder's own view would give.
    nothing_profiled_words: Optional[str] = None

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
        self.manifest: Optional[Manifest] = None
        self.backend_name = ""  # chosen below, once, where this rank has anything to do
        self.queue = WindowQueue()
        self.slot = WindowSlot()
        self.budget = WindowBudget(self._used)
        self.asked = AskedWindows()
        self.poll: Optional[RecorderPoll] = None  # the trigger's and the capture rules' poll
        self._lock = SignalSafeLock()  # a window saved from the export thread, or a signal's flush
        self._flush = FlushOnExit(self.close, wait=self.wait)
        # Per-unit sessions: how far each planned window got (None for a session per window).
        self._units: Optional[UnitWindows] = None
        self._last_begun: Optional[int] = None
        self._failure: Optional[Failure] = None  # how the last failed unit ended
        self._on_final_manifest = on_final_manifest
        if not self.plan.idle:
            self.backend_name, _ = backends.choose(config)
        self.idle = self.plan.idle
        if self.idle:  # the null object of STYLE: the calls become the cheapest thing that works
            self.begin = self.end = self.step_begin = self.step_end = _nothing  # type: ignore
        else:
            time_units(self)

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
    windows_opened = property(lambda self: self.slot.opened)

    @property
    def schedule(self) -> Optional[StepSchedule]:
        """The next (or running) session's schedule."""
        return self.queue.next

    @property
    def _session(self) -> Optional[Session]:
        return self.slot.session

    def describe(self) -> str:
        """How messages name this recorder: its role, else its unit."""
        return f"role {self.role!r}" if self.role else f"{self.unit.name} profiling"

    @property
    def recording(self) -> bool:
        """True while this recorder's session runs (the question other code asks before
        adding to a trace: ``session.window_recording()`` asks it of the process)."""
        return self.slot.running

    @property
    def window_running(self) -> bool:
        """A session records, or a requested window waits for its first unit."""
        slot = self.slot
        return slot.running or (slot.state is State.ARMED and self.asked.holds(self.queue.next))

    @property
    def asked_window_pending(self) -> bool:
        """A window asked for at run time still waits for its first unit or records: False
        once it ended, by its length, a stop, or by itself here (its budget, the recorder
        closing): what a server's routes must learn (``http_control.WindowControl``)."""
        return self.asked.current is not None and not self.closed and self.window_running

    @property
    def planned_window_running(self) -> bool:
        """A window from the flags or the trigger records now (not one asked for at run time)."""
        session = self.slot.session
        return self.slot.running and session is not None \
            and not self.asked.holds(session.schedule)

    def poll_clock(self) -> Any:
        """The capture rules' unit clock, while this recorder polls."""
        return self.poll.clock() if self.poll is not None else None

    @property
    def last_failure(self) -> Optional[Failure]:
        """How the last failed unit ended (a unit's exception, sys.exit, Ctrl-C), if one did."""
        return self._failure

    @property
    def last_begun(self) -> Optional[int]:
        """The last unit that began."""
        return self._last_begun

    @property
    def per_unit(self) -> Optional[UnitWindows]:
        """How far each planned window of per-unit sessions got (None: a session per window)."""
        return self._units

    def add_to_final_manifest(self, manifest: Manifest) -> None:
        """What only the driver knows goes into the final manifest (``on_final_manifest``)."""
        if self._on_final_manifest is not None:
            self._on_final_manifest(manifest)

    def uninstall_flush(self, pending: bool) -> None:
        """The exit flush is no longer needed (``pending``: a background export still runs)."""
        self._flush.uninstall(pending=pending)

    def current_manifest(self) -> Manifest:
        """The manifest, where the recorder's state says there is one (a session opened)."""
        manifest = self.manifest
        if manifest is None:
            raise RuntimeError("this recorder has no manifest")
        return manifest

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
            self.budget.limit = plan.check_budget(self.backend_name,
                                                  plan.selected_on_node(self.local_rank))
        if plan.idle:
            return
        if plan.session_per_unit:
            self._units = UnitWindows(plan.unit, plan.windows, self.report)
        self.queue.load(plan.sessions() if plan.active else ())
        if plan.active:
            self._create_manifest(first, last)
        if plan.polling:
            self.poll = RecorderPoll(plan, self.report, self._room, self._layout_of)
            self.budget.for_captures(plan.config, self.backend_name, plan.selected_ranks)
        self.slot.state = State.ARMED if (self.queue.next or plan.polling) else State.DONE
        self._flush.install()

    def _create_manifest(self, first: Optional[int] = None, last: Optional[int] = None) -> None:
        self.manifest = open_manifest(self.plan, self.backend_name, local_rank=self.local_rank,
                                      parallel=self.parallel, first=first, last=last)
        for note in config_notes(self.plan, self.backend_name):
            self.report("warning", "config", note)

    def _room(self) -> Optional[tuple]:
        """What this rank tells the poll of its room for a capture (``captures.Room``)."""
        if self.slot.state is State.DONE:
            return 0, "profiling has ended there (a profiler failure or --profile-max-gb)"
        return self.budget.room(self.plan.unit)

    # -- per unit (hot path) --------------------------------------------------------------------

    def begin(self, n: int) -> None:
        """Unit ``n`` is about to run."""
        self._last_begun = n
        guard_children()  # torch's SIGCHLD handler comes with the first DataLoader iterator
        poll = self.poll
        if poll is not None and n % self.config.profile_trigger_poll == 0:
            with reporting(self.report, "trigger", self.unit.owner):
                state = self.slot.state
                request = poll.take(n, running=state is State.RUNNING, done=state is State.DONE)
                if request is not None:
                    self.request_window(n, request)
        # A signal's flush reads what opening a session writes: it waits for the unit's
        # boundary to be crossed whole (the poll above may wait on other ranks: not inside).
        with signal_safe:
            slot = self.slot
            if slot.state is State.ARMED:
                self._open_due(n)
            elif slot.running and self._on_session_thread("step"):
                session = slot.current()
                if slot.stop_wanted is not None:
                    self._stop_here(None)
                    return
                ended = False
                with session.failing_safely("step"):
                    ended = session.catch_up(n)
                if ended:
                    self.finish_window()  # the window ended among units the host skipped

    def end(self, n: int, failure: Optional[Failure] = None, *, fatal: bool = True) -> None:
        """Unit ``n`` finished; ``failure`` (reason, detail): an exception ended it, so it is not
        a recorded unit and its window is cut (what ran before it stays). ``fatal=False``: a cut
        that cannot be how the process ends (a request whose caller left its stream unread)."""
        if failure is not None and fatal:
            self._failure = failure
        with signal_safe:  # a signal's flush waits for the unit's end to be recorded whole
            if self.slot.running and self._on_session_thread("step"):
                self._end_running(n, failure)

    def _end_running(self, n: int, failure: Optional[Failure]) -> None:
        session = self.slot.current()
        if failure is not None or self.slot.stop_wanted is not None:
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
            if not self.slot.running:
                return  # the step failed: profiling ended here
            if last:
                self.finish_window()
                self._say_window_end(session)
            elif self.budget.watched:
                self._stop_if_over_budget()

    def _say_window_end(self, session: Session) -> None:
        """On the first profiled rank (rank 0 when it records): the seconds the window's end
        added to its last unit, which the host's log shows 3-7x the others with no word why."""
        plan = self.plan
        if self._units is None and plan.selected_ranks and plan.rank == min(plan.selected_ranks):
            log.info(session.ending_words(plan.unit), rank=plan.rank)

    # The names the training code has always used.
    step_begin = begin
    step_end = end

    def range(self, name: str) -> ContextManager[Any]:
        """A labelled range inside the running session (``prefill``, ``stage:update``); a no-op
        context when nothing records on this thread."""
        session = self.slot.session
        if not self.slot.running or session is None:
            return _NO_RANGE
        if self.slot.stop_wanted is not None and session.on_own_thread:
            with signal_safe:
                if self.slot.running:
                    self._stop_here(None)
            return _NO_RANGE
        return session.range(name)

    def mark(self, name: str, device: bool = False) -> ContextManager[Any]:
        """A pipeline-schedule mark inside the running session (``config/schedule_marks.py``);
        a no-op context when nothing records on this thread."""
        session = self.slot.session
        if not self.slot.running or session is None:
            return _NO_RANGE
        return session.mark(name, device)

    def retract(self, n: int) -> None:
        """Unit ``n`` was begun but did not run (the loop that began it ended instead): its
        profiler step is left out of the trace (torch), or the manifest names it (``never_ran``)
        for check to discount (NPU, parsed later by torch_npu)."""
        with signal_safe:
            if self.slot.running:
                self.slot.current().retract(n)

    def _on_session_thread(self, phase: str) -> bool:
        session = self.slot.current()
        if session.on_own_thread:
            return True
        self.report("error", phase, wrong_thread_words(self.describe(), session.thread))
        return False

    # -- opening and closing sessions -----------------------------------------------------------

    def _open_due(self, n: int) -> None:
        """Open the session unit ``n`` belongs to, passing over sessions the host never reached
        (a resumed role, a step number skipped): what does run is recorded."""
        queue, slot = self.queue, self.slot
        while queue.next is not None and queue.next.end is not None and n >= queue.next.end:
            self._pass_over(queue.next)
            self._next_window()
        schedule = queue.next
        if schedule is None or slot.state is not State.ARMED or n < schedule.first_touched:
            return
        if not self._claim_process(schedule, n):
            self._next_window()
            return
        if not self.budget.allows(schedule):
            self.report("warning", "budget", self.budget.skip_reason(self.unit, schedule))
            PROCESS.release(self)
            slot.state = State.DONE
            queue.drop_rest()
            return
        if self.manifest is None:
            self._create_manifest()  # a trigger request chose a rank the plan did not
        manifest = self.current_manifest()
        if self._units is not None:
            self._units.for_session(manifest, schedule.start)
        slot.opened += 1
        session = Session.for_plan(self.plan, schedule, manifest, self.backend_name,
                                   self.parallel, self.report, on_saved=self.window_saved,
                                   on_failure=self._gave_up,
                                   directory=self.asked.window_dir(self.plan, schedule))
        self._say_why(session)
        self._window_opened(session)
        slot.opening(session)
        manifest.set_status("running")
        if self.poll is not None:
            self.poll.window_running(schedule)
        with session.failing_safely("start"):
            session.start(n)

    def _say_why(self, session: Session) -> None:
        """The manifest window of a requested or captured session says why it was taken."""
        if self.poll is not None:
            reason = self.poll.reason_for(session.schedule.start)
            if reason is not None:
                session.window.set_trigger(reason)

    def _window_opened(self, session: Session) -> None:
        """Who asked for the window the session belongs to (``started_by``)."""
        origin = self.asked.origin(session.schedule, session.window.data.get("trigger"))
        session.window.set_origin(origin)
        if self._units is not None and self._units.current is not None:
            self._units.current.set_origin(origin)

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

    def finish_window(self) -> None:
        session = self.slot.current()
        session.stop()
        PROCESS.release(self)
        self.slot.ended()
        if self._units is not None:
            self._units.session_over(self.manifest, session.schedule)
        if self.slot.running:
            self._next_window()

    def _next_window(self) -> None:
        self.queue.advance()
        self.slot.state = State.ARMED if (self.queue.next or self.poll) else State.DONE

    def _gave_up(self, session: Session) -> None:
        """A profiler call failed: profiling ends on this rank (the work goes on)."""
        if session.backend is None:
            self.current_manifest().fail_window(session.window)  # it could not even be built
        PROCESS.release(self)
        self.slot.ended()
        self.slot.state = State.DONE
        self.queue.drop_rest()

    def _stop_here(self, failure: Optional[Failure]) -> None:
        """On the session's own thread: stop the running session now, its window cut (its unit
        failed, or close() was asked from another thread). What ran before stays recorded."""
        session, slot = self.slot.current(), self.slot
        reason = failure[0] if failure is not None else slot.stop_wanted or "stopped"
        in_progress = session.in_progress()
        session.window.mark_cut(reason, in_progress)
        if self._units is not None:
            self._units.cut(reason, in_progress)
        if slot.stop_wanted is not None:
            self.queue.drop_rest()
            slot.state = State.DONE  # the run is ending: no session after this one
        self.finish_window()
        if failure is not None:
            what = failure[1] or failure[0]
            self.report("warning", "stop", f"{self.plan.unit.name} {in_progress} ended early "
                                           f"({what}); its session was stopped and kept, "
                                           f"marked cut")

    def window_saved(self, session: Session) -> None:
        """A window's data reached disk (from the export thread for async exports, or at close)."""
        with self._lock:
            if self.manifest is None:
                return
            window = session.window
            for path in self.manifest.window_saved(window, session.outputs(), session.status()):
                log.info(f"wrote {path}", rank=self.plan.rank)
            if self.poll is not None and not self.slot.running:
                self.poll.window_ended(window)

    def _used(self) -> int:
        """Bytes this rank's finished windows wrote (the manifest lists them)."""
        return self.manifest.used_bytes() if self.manifest is not None else 0

    def _stop_if_over_budget(self) -> None:
        session = self.slot.current()
        if not self.budget.crossed(session.outputs()):
            return
        recorded = session.window.recorded[-1]
        self.report("warning", "budget", self.budget.stop_reason(self.plan.unit, recorded))
        session.window.mark_stopped_early("--profile-max-gb")
        self.queue.drop_rest()
        self.finish_window()

    # -- the one door: windows no plan asked for ------------------------------------------------

    def request_window(self, n: int, request: WindowRequest) -> str:
        """Before unit ``n``, on the computing thread: queue the window ``request`` asks for (an
        HTTP start, a trigger request, a capture: ``WindowRequest``). Returns "queued", else why
        not (said in the log and the manifest)."""
        unit = self.plan.unit
        if self.idle or self.closed:
            return "not recorded here" if self.idle else "closed"
        if request.sessions:  # a rule chose this rank's sessions (polling.py)
            if self._units is not None and request.window is not None:
                self._units.add(request.window)
            if request.replaces_queue:
                self.queue.load(request.sessions)
            else:
                self.queue.put_first(request.sessions)
            self.slot.state = State.ARMED
            return "queued"
        if self.window_running:
            running = self.slot.current().schedule.start if self.slot.running else None
            self.report("warning", "start", f"a start asked before {unit.name} {n} was ignored: "
                                            f"the window from {unit.name} "
                                            f"{running if running is not None else n} is still "
                                            f"running (one window at a time)")
            return "busy"
        start = n + request.delay
        window = StepSchedule(skip_first=start, warmup=0, active=request.length or OPEN_ENDED)
        # The planned session waiting for its unit goes after it (one refused by the budget,
        # which left the recorder done, does not).
        pending = self.queue.remaining(with_next=self.slot.state is State.ARMED)
        self.queue.load(self.asked.ask(window, request.origin(n), request.prefix,
                                       self.plan.sessions([window]), pending))
        if self._units is not None:
            self._units.add_asked(window)
        self.budget.own_for(self.config, self.backend_name, request)
        self.slot.state = State.ARMED
        return "queued"

    def stop_window(self, reason: str = STOP) -> str:
        """At a boundary, on the computing thread: end the requested window here. Returns
        "stopped", or "not running" (nothing asked for runs: said in the log)."""
        if self.idle:
            return "not recorded here"
        asked = self.asked.current
        session = self.slot.session
        running = self.slot.running and session is not None
        if asked is None or not (running and asked.holds(session.schedule if session else None)
                                 or self.window_running):
            self.report("warning", "stop", f"a stop ({reason}) arrived while no window asked "
                                           f"for at run time was running; nothing to stop")
            return "not running"
        self.asked.current = None  # the generator opens none of its remaining sessions
        self.budget.end_own()  # the window's own budget ends with it
        finite = asked.window.end is not None
        if running and session is not None and session.on_own_thread:
            if finite and self._units is None:
                # A window with a length that completes ends by itself (and is no demand any
                # more): one still running here is stopped before its length.
                session.window.mark_stopped_early(reason)
            if self._units is not None:
                self._units.stop(self.manifest, asked.window, reason if finite else None)
            self.finish_window()
            return "stopped"
        # Still in its delay, or between two units' sessions.
        if self._units is not None:
            self._units.stop(self.manifest, asked.window, reason if finite else None)
        if asked.holds(self.queue.next):
            self._next_window()
        if self.slot.opened == 0 or not (session is not None and asked.holds(session.schedule)):
            self.report("warning", "stop", f"the window asked for from {self.plan.unit.name} "
                                           f"{asked.window.start} was stopped ({reason}) "
                                           f"before its first {self.plan.unit.name} ran; "
                                           f"nothing was recorded for it")
        return "stopped"

    # -- how the work runs ----------------------------------------------------------------------

    def split_per_unit(self) -> bool:
        """The work hops threads between units: record every window one session per unit from
        now on. Only before the first window opened; True when the split happened (or was)."""
        if self.plan.session_per_unit:
            return True
        if self.slot.opened or self.slot.running or self.idle:
            return False
        remaining = list(self.queue.remaining())
        self.plan = dataclasses.replace(self.plan, session_per_unit=True)
        self.queue.load(self.plan.sessions(remaining))
        self._units = UnitWindows(self.plan.unit, remaining, self.report)
        return True

    def note(self, n: int, info: Dict[str, Any]) -> None:
        """What unit ``n`` carried, into the running window's entry (before its ``end(n)``)."""
        session = self.slot.session
        if self.slot.running and session is not None and session.on_own_thread \
                and n >= session.schedule.start:
            session.window.note_unit(n, info)

    def at_boundary(self) -> None:
        """Between units on the computing thread: a close asked from another thread stops the
        running session here (even when no unit runs: an idle server)."""
        session = self.slot.session
        if self.slot.stop_wanted is not None and self.slot.running \
                and session is not None and session.on_own_thread:
            self._stop_here(None)

    # -- the end (shutdown.py) ------------------------------------------------------------------

    @guarded
    def close(self, reason: str = "finished", detail: Optional[str] = None,
              wait_timeout: Optional[float] = None, wait: bool = True) -> None:
        """Stop any running window, wait for its files, write the final manifest. Idempotent.

        ``wait=False`` leaves a background export running (its thread keeps the process alive
        and finishes the manifest); see ``wait()``."""
        # Begun, a close runs whole: a Ctrl-C landing before its final flush holds signals
        # would leave a manifest that never says how the run ended; a DataLoader worker's death
        # landing there is only noted (``flushing.guarded_code``) and handed on at the end.
        try:
            with signal_safe:
                if not self.closed:
                    self.closed = True
                    shutdown.close(self, reason, detail, wait_timeout, wait)
        finally:
            hand_on_children(sys._getframe(1))

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait for the last window's background export/parse; True when nothing is pending."""
        session = self.slot.session
        return session is None or session.wait(timeout)

    def cut_window(self) -> Optional[PlannedWindow]:
        """The planned window of per-unit sessions that the run left cut, if any."""
        return self._units.cut_window() if self._units is not None else None

    def release_manifest(self) -> None:
        if self.manifest is not None:
            release_for_recorder(manifest_path(self.plan.save_path, self.plan.rank))

    # -- reporting ------------------------------------------------------------------------------

    def report(self, kind: str, phase: str, message: str) -> None:
        """Log on this rank and record in the manifest; never raises."""
        (log.error if kind == "error" else log.warning)(f"{phase}: {message}", rank=self.rank)
        if self.manifest is not None:
            self.manifest.record(kind, phase, message)
