"""One driver shape for every scenario, and the null driver hooks hold when nothing records.

A driver counts its scenario's unit (iterations, requests, RL steps, engine steps) and tells a
window recorder ``begin(n)``/``end(n)``; the recorder records. Hooks never test for ``None``:
while nothing is profiled in a process they hold ``NULL_DRIVER``, whose every call is the
cheapest thing that works (Lightning's ``PassThroughProfiler``), so the hot path has no branch.
"""

import contextlib
from typing import Any, Callable, ContextManager, Optional, Protocol, Tuple, TypeVar

T = TypeVar("T")
_NOTHING = contextlib.nullcontext()  # reusable: what every no-op call returns


class Driver(Protocol):
    """What every driver offers (training, requests, RL steps, engine steps)."""

    @property
    def idle(self) -> bool:
        """Nothing is ever recorded by this driver in this process."""

    @property
    def closed(self) -> bool: ...

    def begin(self, n: int) -> None:
        """Unit ``n`` is about to run."""

    def end(self, n: int, failure: Optional[Tuple[str, Optional[str]]] = None) -> None:
        """Unit ``n`` finished (``failure``: how it failed, as ``exits.exit_reason`` says)."""

    def range(self, name: str) -> ContextManager[Any]:
        """A labelled range inside the running unit's session (a no-op where none runs)."""

    def close(self, reason: str = "finished", detail: Optional[str] = None) -> None:
        """Stop, flush, write the final manifest; idempotent."""


class NullDriver:
    """The driver of a process (or a scenario) that records nothing: every call passes straight
    through. It offers every scenario's calls, so each hook holds it as it would a real one."""

    idle = True
    closed = True

    def begin(self, n: int) -> None:
        return None

    def end(self, n: int, failure: Optional[Tuple[str, Optional[str]]] = None) -> None:
        return None

    def range(self, name: str) -> ContextManager[Any]:
        return _NOTHING

    def mark(self, name: str, device: bool = False) -> ContextManager[Any]:
        return _NOTHING

    def close(self, reason: str = "finished", detail: Optional[str] = None, **_: Any) -> None:
        return None

    def run(self, number: Callable[[tuple, dict], int], label: Optional[str],
            work: Callable[..., T], args: tuple, kwargs: dict) -> T:
        """One unit of work (training's ``train_step``): here, just the work."""
        return work(*args, **kwargs)

    # the request driver's calls
    def request(self) -> ContextManager[Any]:
        return _NOTHING

    def forward(self) -> ContextManager[Any]:
        return _NOTHING

    def serve(self, work: Callable[..., T], args: tuple, kwargs: dict) -> T:
        """One request (``generate``): here, just the work, its result as it is."""
        return work(*args, **kwargs)

    # the RL step driver's calls
    def step(self, step: int) -> ContextManager[Any]:
        return _NOTHING

    def stage(self, name: str) -> ContextManager[Any]:
        return _NOTHING


NULL_DRIVER = NullDriver()


class RecorderView:
    """What a driver that owns one window recorder (``self.recorder``) says about it: the
    training, request and engine-step drivers share these (an RL role owns one per stage)."""

    recorder: Any  # a WindowRecorder

    @property
    def rank(self) -> int:
        return self.recorder.rank

    @property
    def idle(self) -> bool:
        return self.recorder.idle

    @property
    def closed(self) -> bool:
        return self.recorder.closed

    @property
    def recording(self) -> bool:
        return self.recorder.recording

    @property
    def manifest(self) -> Any:
        return self.recorder.manifest

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait for the last window's background export; True when nothing is pending."""
        return self.recorder.wait(timeout)
