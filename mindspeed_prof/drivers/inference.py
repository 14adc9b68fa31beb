"""The inference driver: a window recorder counting requests, with forwards as labelled ranges.

A request is one call of the engine's ``generate`` (one HTTP request of Megatron's server, one
offline batch, one MindSpeed-LLM ``generate``), numbered from 1 in the order this process serves
them. Every rank of a model-parallel group runs each request, so the numbers agree across ranks
without any communication. Inside a request, each forward is a labelled range: ``prefill`` for
the first, ``decode`` for the others::

    driver = RequestDriver(config, rank=r, world_size=w)
    driver.arm()                               # windows, save path, budget checked now
    with driver.request():                     # request n: its own profiler session
        for position in positions:
            with driver.forward():             # "prefill", then "decode"
                model(...)
    driver.close("finished")

Megatron's server runs each request on a new Flask thread on rank 0 (the main thread elsewhere),
and a profiler session records, steps and stops only on the thread that started it, so every
request of a window is recorded as its own session in its own ``req_{n}-{n}/`` folder.
A ``generate`` called from inside another (MindSpeed-LLM's ``generate`` over Megatron's engine)
is part of the outer request, not a new one.
"""

import contextlib
import threading
from typing import Iterator, Optional

from ..recorder import WindowRecorder
from ..units import REQUEST
from ..window import plan_windows

PREFILL = "prefill"
DECODE = "decode"

_NO_RANGE = contextlib.nullcontext()


class RequestRecorder(WindowRecorder):
    """A server's window recorder: a session per request, and a close (whoever calls it: the
    driver, the exit flush, SIGTERM) that says whether the server stopped inside a window."""

    def __init__(self, config, **kwargs):
        super().__init__(config, unit=REQUEST, session_per_unit=True, **kwargs)
        self.served = 0  # requests started in this process (the driver counts them)

    def close(self, reason: str = "finished", detail: Optional[str] = None,
              wait_timeout: Optional[float] = None, wait: bool = True) -> None:
        if not self.closed and self.manifest is not None:
            self.manifest.data["requests_served"] = self.served
            self._say_if_cut(reason)
        super().close(reason, detail or f"after {self.served} requests",
                      wait_timeout=wait_timeout, wait=wait)

    def _say_if_cut(self, reason):
        """A server has no last request, so a window may still be open when it stops."""
        if self.config.profile_trigger_file:
            return
        served = self.served
        for plan in plan_windows(self.config):
            if plan.end is None or not plan.start <= served < plan.end - 1:
                continue
            self.manifest.data["window_cut"] = {"start": plan.start, "end": plan.end,
                                                "last_served": served}
            self.report("warning", "stop", f"the server stopped ({reason}) after request "
                                           f"{served}, before the window of requests "
                                           f"{plan.start}-{plan.end - 1} completed: requests "
                                           f"{plan.start}-{served} were recorded")


class RequestDriver:
    def __init__(self, config, *, rank: int = 0, world_size: int = 1,
                 local_rank: Optional[int] = None, layout_of=None,
                 parallel: Optional[dict] = None):
        self.recorder = RequestRecorder(config, rank=rank, world_size=world_size,
                                        local_rank=local_rank, layout_of=layout_of,
                                        parallel=parallel)
        self._lock = threading.Lock()
        self._local = threading.local()  # per thread: nesting depth and forwards so far
        if self.recorder.idle:
            # Nothing to do on this rank: no counting, no ranges (the null object of STYLE).
            self.request = self.forward = self._nothing

    @property
    def rank(self) -> int:
        return self.recorder.rank

    @property
    def closed(self) -> bool:
        return self.recorder.closed

    @property
    def requests(self) -> int:
        """Requests started in this process: the last request's number."""
        return self.recorder.served

    def arm(self) -> None:
        """Plan the windows in requests; a server has no known last request."""
        self.recorder.arm(first=1, last=None)

    @contextlib.contextmanager
    def request(self) -> Iterator[Optional[int]]:
        """One request, on the thread that computes it; nested calls belong to the outer one."""
        local = self._local
        depth = getattr(local, "depth", 0)
        local.depth = depth + 1
        if depth:
            try:
                yield None
            finally:
                local.depth = depth
            return
        with self._lock:
            self.recorder.served += 1
            n = self.recorder.served
        local.forwards = 0
        self.recorder.begin(n)
        try:
            yield n
        finally:
            local.depth = depth
            self.recorder.end(n)  # a request's session stops here, signals held (recorder)

    def forward(self):
        """A labelled range around one forward of the running request (a no-op outside one)."""
        local = self._local
        if not getattr(local, "depth", 0):
            return _NO_RANGE
        first = local.forwards == 0
        local.forwards += 1
        return self.recorder.range(PREFILL if first else DECODE)

    def close(self, reason: str = "finished", detail: Optional[str] = None,
              wait_timeout: Optional[float] = None) -> None:
        """Flush and write the final manifest; says when the server stopped inside a window."""
        self.recorder.close(reason, detail, wait_timeout=wait_timeout)

    def wait(self, timeout: Optional[float] = None) -> bool:
        return self.recorder.wait(timeout)

    @staticmethod
    def _nothing():
        return _NO_RANGE

