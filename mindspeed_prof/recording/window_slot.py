"""The recorder's one session and the state it is in (a part of ``WindowRecorder``).

``IDLE`` (not armed, or nothing to do here), ``ARMED`` (waiting for the next session's first
unit, or for a trigger), ``RUNNING`` (a session records: ``session`` is it) and ``DONE``
(nothing more will be recorded). A close asked from another thread is a wish (``stop_wanted``)
that the session's own thread carries out at its next boundary; ``stopped`` is set whenever a
session ends, on whichever thread.
"""

import enum
import threading
from typing import Optional, Tuple

from .session import Session

Failure = Tuple[str, Optional[str]]  # (reason, detail) as exits.exit_reason gives them


class State(enum.Enum):
    IDLE = "idle"        # not armed, or nothing to do on this rank
    ARMED = "armed"      # waiting for the next session's first unit (or a trigger)
    RUNNING = "running"  # a session records
    DONE = "done"        # nothing more will be recorded


class WindowSlot:
    def __init__(self) -> None:
        self.state = State.IDLE
        self.session: Optional[Session] = None  # the running one, or the last one that ran
        self.stop_wanted: Optional[str] = None  # close() asked from another thread: the reason
        self.stopped = threading.Event()
        self.opened = 0  # sessions opened so far

    @property
    def running(self) -> bool:
        return self.state is State.RUNNING

    def current(self) -> Session:
        """The running session (or the last one): only asked where one has opened."""
        session = self.session
        if session is None:
            raise RuntimeError("the recorder has opened no session")
        return session

    def opening(self, session: Session) -> None:
        self.session, self.state, self.stop_wanted = session, State.RUNNING, None
        self.stopped.clear()

    def ended(self) -> None:
        self.stopped.set()

    def done(self) -> None:
        """Nothing more will be recorded."""
        self.state = State.DONE

    def ask_stop(self, reason: str, grace: float) -> bool:
        """From another thread: ask the session's own thread to stop it at its next boundary,
        and wait at most ``grace`` seconds; True when it stopped."""
        self.stop_wanted = reason
        return self.stopped.wait(grace)
