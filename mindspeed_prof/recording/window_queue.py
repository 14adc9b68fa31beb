"""The sessions a recorder still opens, in order (a part of ``WindowRecorder``).

The planned windows' sessions are loaded at arm; a window asked for while the work runs (an
HTTP start, a trigger request, a capture) is put before what remains. ``next`` is the session
that opens next, or runs now; the rest are drawn one at a time, so a repeated window
(``--profile-every``) or an open-ended one never builds a list.
"""

import itertools
from typing import Iterable, Iterator, Optional

from ..config.window import StepSchedule


class WindowQueue:
    def __init__(self) -> None:
        self.next: Optional[StepSchedule] = None
        self._rest: Iterator[StepSchedule] = iter(())

    def load(self, sessions: Iterable[StepSchedule]) -> None:
        """These sessions, in place of what was queued; the first becomes ``next``."""
        self._rest = iter(sessions)
        self.advance()

    def advance(self) -> Optional[StepSchedule]:
        """The session after ``next`` becomes ``next`` (None: nothing more)."""
        self.next = next(self._rest, None)
        return self.next

    def drop_rest(self) -> None:
        """Nothing after ``next`` opens (the run is ending, the budget is spent)."""
        self._rest = iter(())

    def remaining(self, with_next: bool = True) -> Iterator[StepSchedule]:
        """What is queued, ``next`` first unless ``with_next`` is False (drawn lazily: load
        the result back, or nothing is left)."""
        head = [self.next] if with_next and self.next is not None else []
        return itertools.chain(head, self._rest)

    def put_first(self, sessions: Iterable[StepSchedule]) -> None:
        """These sessions open before everything queued (``next`` included)."""
        self.load(itertools.chain(sessions, self.remaining()))
