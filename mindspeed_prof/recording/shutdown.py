"""How a window recorder ends (DESIGN §6): ``close(recorder, ...)``.

It stops a running session (on its own thread: from another one it asks that thread to stop
it at its next unit boundary, and waits, bounded), cuts the window it was in, waits for the
export, and writes the final manifest with how the run ended. It runs inside
``flush.final_flush``, so a job-wide signal, dying DataLoader workers or a closed console cannot
abort it. The recorder's whole life is in ``recorder.py``; its end is here.
"""

import threading
from typing import TYPE_CHECKING, Optional

from .flush import final_flush
from .notices import session_cut_words
from .session import PROCESS

if TYPE_CHECKING:
    from .recorder import WindowRecorder

# How long close() from another thread waits for a running session's own thread to stop it at
# its next unit boundary or range (a server's request thread, when SIGTERM or the exit flush
# runs on the main thread), when the caller gives no bound of its own.
STOP_GRACE_S = 5.0


def close(recorder: "WindowRecorder", reason: str, detail: Optional[str],
          wait_timeout: Optional[float], wait: bool) -> None:
    """``WindowRecorder.close``'s work, once (see the module)."""
    failure = recorder.last_failure
    if reason == "process exit" and failure is not None \
            and failure[0] in ("sys.exit", "interrupted"):
        # The exit flush does not know how the process ended; a unit that sys.exit or
        # Ctrl-C ended does (an exception that ended the process is sys.last_value, and one
        # the host caught and served on from is no way the process ended).
        reason, detail = failure
    pending = False
    # Whatever ends the process (a job-wide signal killing the DataLoader workers, a second
    # signal, a closed console) must not abort the stop, the export or the manifest.
    with final_flush() as events:
        try:
            if recorder.slot.running:
                _close_running_window(recorder, reason, wait_timeout)
            _close_planned(recorder, reason)
            if wait and not recorder.wait(wait_timeout):
                recorder.report("error", "stop", f"the trace was still being written when the "
                                                 f"process ended (waited at most {wait_timeout} "
                                                 f"s); it is incomplete")
            pending = not wait and not recorder.wait(0)
            if recorder.manifest is not None:
                _finish_manifest(recorder, reason, detail, events.as_dict())
            if recorder.poll is not None:
                recorder.poll.close(reason)
        finally:
            recorder.uninstall_flush(pending)
            PROCESS.release(recorder)
            recorder.slot.done()
            recorder.release_manifest()


def _close_running_window(recorder: "WindowRecorder", reason: str,
                          wait_timeout: Optional[float]) -> None:
    slot, plan = recorder.slot, recorder.plan
    session = slot.current()
    recorder.queue.drop_rest()
    if not session.on_own_thread:
        # Stopping it here could crash the process: ask its own thread to stop it at its
        # next unit boundary or range, and wait for that (bounded).
        grace = STOP_GRACE_S if wait_timeout is None else min(wait_timeout, STOP_GRACE_S)
        if slot.ask_stop(reason, grace):
            return
        slot.done()
        session.abandon()
        recorded = list(session.window.recorded)
        recorder.report("error", "stop", f"{plan.unit.owner} ended ({reason}) while "
                                         f"the session of {recorder.describe()} was running on "
                                         f"thread {session.thread}; it cannot be stopped from "
                                         f"thread {threading.get_ident()} and its own thread did "
                                         f"not stop it within {grace:g} s, so "
                                         f"{plan.unit.plural} {recorded or 'in progress'} were "
                                         f"not written")
        return
    if not (reason == "finished" and session.schedule.end is None):
        # Cut short: the window keeps what it recorded, and says so (check's `cut`). An
        # open-ended window that ends with its loop is whole.
        session.window.mark_cut(reason, session.in_progress())
    recorder.finish_window()
    if recorder.per_unit is None:
        window = session.window
        recorder.report("warning", "stop", session_cut_words(
            plan.unit, reason, window.recorded, window.start, bool(session.outputs())))


def _close_planned(recorder: "WindowRecorder", reason: str) -> None:
    """A planned window of per-unit sessions still open when the run ends is cut."""
    units, manifest = recorder.per_unit, recorder.manifest
    if units is None or manifest is None:
        return
    session = recorder.slot.session
    cut = session.window.data.get("cut", {}) if session is not None else {}
    in_progress = cut.get("in_progress")
    # the session of the unit cut mid-way was stopped and its trace written
    written = session is not None and in_progress is not None and bool(session.outputs())
    units.close(manifest, reason, in_progress, recorder.last_begun,
                in_progress if written else None)


def _finish_manifest(recorder: "WindowRecorder", reason: str, detail: Optional[str],
                     events: dict) -> None:
    manifest, plan = recorder.current_manifest(), recorder.plan
    manifest.set_exit(reason, detail, events)
    if recorder.poll is not None and plan.config.captures:
        manifest.set_captures(recorder.poll.summary())
    recorder.add_to_final_manifest(manifest)
    if not recorder.slot.opened and not plan.polling:
        manifest.mark_nothing_profiled()
        planned, unit, schedule = plan.windows, plan.unit, recorder.queue.next
        if recorder.nothing_profiled_words is not None:
            recorder.report("warning", "stop", recorder.nothing_profiled_words)
        elif not planned and schedule is None:
            recorder.report("warning", "stop", f"{unit.owner} ended ({reason}) and no window "
                                               f"was asked for (no window flags, no HTTP start); "
                                               f"nothing was profiled")
        else:
            start = schedule.start if schedule else planned[0].start
            recorder.report("warning", "stop", f"{unit.owner} ended ({reason}) before "
                                               f"{unit.name} {start}; nothing was profiled")
    elif recorder.slot.session is not None:
        recorder.window_saved(recorder.slot.session)
    # Retried here whatever failed before (a full disk); over the old bytes if need be.
    manifest.save(final=True)
