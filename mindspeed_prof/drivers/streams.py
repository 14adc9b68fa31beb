"""A streamed request: the iterator a ``generate`` returned, consumed while its request stays
open on the thread that began it (MindSpeed-LLM's ``generate(stream=True)`` computes every token
as its caller iterates). The request driver (``inference.py``) owns the request; these classes
only follow the stream.
"""

import threading
from typing import Any, Callable, Iterator, Optional

# The reason a request is cut when its caller leaves its stream unfinished: not an exception, so
# never how the process ended.
ABANDONED = "abandoned"


class Stream:
    """A request whose generation its caller is still consuming (``serve`` returned it)."""

    def __init__(self, n: int, thread: int) -> None:
        self.n, self.thread = n, thread
        self.done = False
        self.elsewhere: Optional[int] = None  # a thread other than its own that consumed it

    def cut_elsewhere(self) -> Optional[tuple]:
        if self.elsewhere is None:
            return None
        return (ABANDONED, f"its output stream was consumed on thread {self.elsewhere}, not on "
                           f"thread {self.thread} that began it: that work is not recorded")


class Advancing:
    """The iterator a streamed request returned, advanced inside that request: each step runs
    with the request open on its thread (its forwards are labelled, a ``generate`` inside it is
    part of it); between steps the thread is free to begin another request."""

    def __init__(self, local: Any, stream: Stream, items: Iterator[Any]) -> None:
        self.local, self.stream, self.items = local, stream, items

    def _step(self, call: Callable[..., Any], *args: Any) -> Any:
        stream = self.stream
        if stream.done:
            return call(*args)
        if threading.get_ident() != stream.thread:
            stream.elsewhere = threading.get_ident()
            return call(*args)
        local = self.local  # a threading.local: this thread's values
        depth = getattr(local, "depth", 0)
        local.depth = depth + 1
        try:
            return call(*args)
        finally:
            local.depth = depth

    def __iter__(self) -> "Advancing":
        return self

    def __next__(self) -> Any:
        return self._step(next, self.items)

    def send(self, value: Any) -> Any:
        return self._step(self.items.send, value)  # type: ignore[attr-defined]

    def throw(self, *exc: Any) -> Any:
        return self._step(self.items.throw, *exc)  # type: ignore[attr-defined]

    def close(self) -> None:
        close = getattr(self.items, "close", None)
        if close is not None:
            self._step(close)
