"""How windows and a window recorder end: a session's end, the final flush (DESIGN §6).

``close`` stops a running session (on its own thread: from another one it asks that thread to
stop it at its next unit boundary, and waits, bounded), cuts the window it was in, waits for
the export, and writes the final manifest with how the run ended. It runs inside
``exits.final_flush``, so a job-wide signal, dying DataLoader workers or a closed console cannot
abort it. A mixin of ``WindowRecorder``, kept apart because it is the recorder's second idea:
its whole life is in ``recorder.py``, its end here.
"""

import enum
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Tuple

from .. import log
from ..layout import manifest_path
from .manifest import release_for_recorder
from .manifest_entries import PlannedWindow
from .notices import session_cut_words
from .exits import FlushOnExit, SignalSafeLock, final_flush, signal_safe
from .manifest import Manifest
from .session import PROCESS, Session
from ..control.trigger import TriggerWatcher
from .unit_windows import UnitWindows
from ..config.window import StepSchedule

if TYPE_CHECKING:
    from .plan import Plan

Failure = Tuple[str, Optional[str]]  # (reason, detail) as exits.exit_reason gives them

# How long close() from another thread waits for a running session's own thread to stop it at
# its next unit boundary or range (a server's request thread, when SIGTERM or the exit flush
# runs on the main thread), when the caller gives no bound of its own.
STOP_GRACE_S = 5.0


class State(enum.Enum):
    IDLE = "idle"        # not armed, or nothing to do on this rank
    ARMED = "armed"      # waiting for the next session's first unit (or a trigger)
    RUNNING = "running"  # a session records
    DONE = "done"        # nothing more will be recorded



class RecorderShutdown:
    """The ending half of ``WindowRecorder`` (its attributes are the recorder's): how a
    session ends (its last unit, a failure, the budget, a stop asked from another thread) and
    how the recorder ends."""

    # What this half reads and writes of the recorder (set in WindowRecorder.__init__).
    plan: "Plan"
    closed: bool
    schedule: Optional[StepSchedule]
    manifest: Optional[Manifest]
    _queue: Iterator[StepSchedule]
    _session: Optional[Session]
    _state: State
    _windows_opened: int
    _lock: SignalSafeLock
    _flush: FlushOnExit
    _watcher: Optional[TriggerWatcher]
    _poller: Any  # captures.CapturePoll, where the recorder polls
    _budget: Any
    _stop_wanted: Optional[str]
    _stopped: threading.Event
    _units: Optional[UnitWindows]
    _last_begun: Optional[int]
    _failure: Optional[Failure]
    _on_final_manifest: Optional[Callable[[Manifest], None]]

    # Why nothing was profiled, in a driver's words (an RL stage that never ran), said at close
    # instead of "ended before {unit} N", which only the recorder's own view would give.
    nothing_profiled_words: Optional[str] = None

    def report(self, kind: str, phase: str, message: str) -> None:
        raise NotImplementedError  # WindowRecorder's

    def describe(self) -> str:
        raise NotImplementedError  # WindowRecorder's

    def _finish_window(self) -> None:
        session = self._session
        session.stop()
        PROCESS.release(self)
        self._stopped.set()
        if self._units is not None:
            self._units.session_over(self.manifest, session.schedule)
        if self._state is State.RUNNING:
            self._next_window()

    def _next_window(self) -> None:
        self.schedule = next(self._queue, None)
        self._state = State.ARMED if (self.schedule or self._poller) else State.DONE

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
        if self._units is not None:
            self._units.cut(reason, in_progress)
        if self._stop_wanted is not None:
            self._queue = iter(())
            self._state = State.DONE  # the run is ending: no session after this one
        self._finish_window()
        if failure is not None:
            what = failure[1] or failure[0]
            self.report("warning", "stop", f"{self.plan.unit.name} {in_progress} ended early ({what});"
                                           f" its session was stopped and kept, marked cut")

    def _on_saved(self, session: Session) -> None:
        """A window's data reached disk (from the export thread for async exports)."""
        with self._lock:
            if self.manifest is None:
                return
            window = session.window
            for path in self.manifest.window_saved(window, session.outputs(), session.status()):
                log.info(f"wrote {path}", rank=self.plan.rank)
            if self._watcher is not None and self._state is not State.RUNNING:
                self._watcher.window_ended(window)

    def _used(self) -> int:
        """Bytes this rank's finished windows wrote (the manifest lists them)."""
        return self.manifest.used_bytes() if self.manifest is not None else 0

    def _stop_if_over_budget(self) -> None:
        session = self._session
        if not self._budget.crossed(self._used(), session.outputs()):
            return
        recorded = session.window.recorded[-1]
        self.report("warning", "budget", self._budget.stop_reason(self.plan.unit, recorded))
        session.window.mark_stopped_early("--profile-max-gb")
        self._queue = iter(())
        self._finish_window()

    # -- the recorder's end --------------------------------------------------------------------


    def close(self, reason: str = "finished", detail: Optional[str] = None,
              wait_timeout: Optional[float] = None, wait: bool = True) -> None:
        """Stop any running window, wait for its files, write the final manifest. Idempotent.

        ``wait=False`` leaves a background export running (its thread keeps the process alive
        and finishes the manifest); see ``wait()``."""
        # Begun, a close runs whole: a Ctrl-C landing before its final flush holds signals
        # would leave a manifest that never says how the run ended.
        with signal_safe:
            if not self.closed:
                self.closed = True
                self._close(reason, detail, wait_timeout, wait)

    def _close(self, reason: str, detail: Optional[str], wait_timeout: Optional[float],
               wait: bool) -> None:
        if reason == "process exit" and self._failure is not None \
                and self._failure[0] in ("sys.exit", "interrupted"):
            # The exit flush does not know how the process ended; a unit that sys.exit or
            # Ctrl-C ended does (an exception that ended the process is sys.last_value, and one
            # the host caught and served on from is no way the process ended).
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
                if self._poller is not None:
                    self._poller.stop()
            finally:
                self._flush.uninstall(pending=pending)
                PROCESS.release(self)
                self._state = State.DONE
                if self.manifest is not None:
                    release_for_recorder(manifest_path(self.plan.save_path, self.plan.rank))

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
            self.report("error", "stop", f"{self.plan.unit.owner} ended ({reason}) while "
                                         f"the session of {self.describe()} was running on thread "
                                         f"{session.thread}; it cannot be stopped from thread "
                                         f"{threading.get_ident()} and its own thread did not "
                                         f"stop it within {grace:g} s, so {self.plan.unit.plural} "
                                         f"{recorded or 'in progress'} were not written")
            return
        if not (reason == "finished" and session.schedule.end is None):
            # Cut short: the window keeps what it recorded, and says so (check's `cut`). An
            # open-ended window that ends with its loop is whole.
            session.window.mark_cut(reason, session.in_progress())
        self._finish_window()
        if self._units is None:
            window = session.window
            self.report("warning", "stop", session_cut_words(
                self.plan.unit, reason, window.recorded, window.start, bool(session.outputs())))

    def _close_planned(self, reason: str) -> None:
        """A planned window of per-unit sessions still open when the run ends is cut."""
        if self._units is None or self.manifest is None:
            return
        session = self._session
        cut = session.window.data.get("cut", {}) if session is not None else {}
        in_progress = cut.get("in_progress")
        # the session of the unit cut mid-way was stopped and its trace written
        written = session is not None and in_progress is not None and bool(session.outputs())
        self._units.close(self.manifest, reason, in_progress, self._last_begun,
                          in_progress if written else None)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait for the last window's background export/parse; True when nothing is pending."""
        return self._session is None or self._session.wait(timeout)

    def cut_window(self) -> Optional[PlannedWindow]:
        """The planned window of per-unit sessions that the run left cut, if any."""
        return self._units.cut_window() if self._units is not None else None

    def _finish_manifest(self, reason: str, detail: Optional[str], events: dict) -> None:
        manifest = self.manifest
        if manifest is None:
            return
        manifest.set_exit(reason, detail, events)
        if self._poller is not None and self.plan.config.captures:
            manifest.set_captures(self._poller.summary())
        if self._on_final_manifest is not None:
            self._on_final_manifest(manifest)
        if not self._windows_opened and not self.plan.polling:
            manifest.mark_nothing_profiled()
            planned, unit = self.plan.windows, self.plan.unit
            if self.nothing_profiled_words is not None:
                self.report("warning", "stop", self.nothing_profiled_words)
            elif not planned and self.schedule is None:
                self.report("warning", "stop", f"{unit.owner} ended ({reason}) and no window "
                                               f"was asked for (no window flags, no HTTP start); "
                                               f"nothing was profiled")
            else:
                start = self.schedule.start if self.schedule else planned[0].start
                self.report("warning", "stop", f"{unit.owner} ended ({reason}) before "
                                               f"{unit.name} {start}; nothing was profiled")
        elif self._session is not None:
            self._on_saved(self._session)
        # Retried here whatever failed before (a full disk); over the old bytes if need be.
        manifest.save(final=True)
