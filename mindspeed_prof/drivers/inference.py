"""The request driver: requests as the unit, forwards as labelled ranges.

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

With ``--profile-forwards A-B`` a request's session opens at its forward A and ends after its
forward B (verl's ``profile_token_start/end``: a decode window inside each request); its step id
is still the request's number.

Megatron's server runs each request on a new Flask thread on rank 0 (the main thread elsewhere),
and a profiler session records, steps and stops only on the thread that started it, so every
request of a window is recorded as its own session in its own ``req_{n}-{n}/`` folder. The
driver counts (``requests``); the recorder records. A ``generate`` called from inside another
(MindSpeed-LLM's ``generate`` over Megatron's engine) is part of the outer request.
"""

import contextlib
import threading
from typing import Any, ContextManager, Iterator, Optional, Tuple

from ..config import ProfilerConfig
from ..exits import exit_reason
from ..manifest import Manifest
from ..recorder import WindowRecorder
from ..units import REQUEST
from .base import NULL_DRIVER

PREFILL = "prefill"
DECODE = "decode"


class RequestDriver:
    def __init__(self, config: ProfilerConfig, *, rank: int = 0, world_size: int = 1,
                 local_rank: Optional[int] = None, layout_of: Any = None,
                 parallel: Optional[dict] = None) -> None:
        self.recorder = WindowRecorder(config, rank=rank, world_size=world_size,
                                       local_rank=local_rank, layout_of=layout_of,
                                       parallel=parallel, unit=REQUEST, session_per_unit=True,
                                       on_final_manifest=self._final_notes)
        self.requests = 0  # requests started in this process: the last request's number
        # --profile-forwards A-B: only forwards A..B of each request are recorded.
        self._forwards: Optional[Tuple[int, int]] = (
            config.profile_forwards[0] if config.profile_forwards else None)
        self._lock = threading.Lock()
        self._local = threading.local()  # per thread: nesting depth and forwards so far
        self.begin, self.end = self.recorder.begin, self.recorder.end
        if self.recorder.idle:
            # Nothing to do on this rank: no counting, no ranges (the null driver's calls).
            self.request, self.forward = NULL_DRIVER.request, NULL_DRIVER.forward  # type: ignore

    @property
    def rank(self) -> int:
        return self.recorder.rank

    @property
    def idle(self) -> bool:
        return self.recorder.idle

    @property
    def closed(self) -> bool:
        return self.recorder.closed

    def arm(self, planned: bool = True) -> None:
        """Plan the windows in requests; a server has no known last request. ``planned=False``:
        no window flag was given; a server's HTTP start opens one."""
        self.recorder.arm(first=1, last=None, planned=planned)

    def start_window(self, request: Any) -> str:
        """An HTTP start, decided on every rank before the next request (the static server)."""
        return self.recorder.request_window(self.requests + 1, request)

    def stop_window(self) -> str:
        return self.recorder.stop_window()

    @contextlib.contextmanager
    def request(self) -> Iterator[Optional[int]]:
        """One request, on the thread that computes it; nested calls belong to the outer one.
        A request that raises is cut: it is not a recorded request, and its window is cut."""
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
            self.requests += 1
            n = self.requests
        local.forwards, local.n = 0, n
        # --profile-forwards A-B: the request's session opens at its forward A, not here.
        local.begun = self._forwards is None
        local.ended = False
        if local.begun:
            self.recorder.begin(n)
        failure = None
        try:
            yield n
        except BaseException as exc:
            failure = exit_reason(type(exc), exc)
            raise
        finally:
            local.depth = depth
            if local.begun and not local.ended:
                self.recorder.end(n, failure)  # a request's session stops here, signals held
            elif not local.begun:
                self._too_short(n, local.forwards)

    def forward(self) -> ContextManager[Any]:
        """A labelled range around one forward of the running request (a no-op outside one)."""
        local = self._local
        if not getattr(local, "depth", 0):
            return NULL_DRIVER.range(PREFILL)
        first = local.forwards == 0
        local.forwards += 1
        label = PREFILL if first else DECODE
        if self._forwards is not None:
            return self._forward_in_window(local, local.forwards, label)
        return self.recorder.range(label)

    @contextlib.contextmanager
    def _forward_in_window(self, local: Any, k: int, label: str) -> Iterator[None]:
        """Forward ``k`` of the request under ``--profile-forwards A-B``: forward A begins the
        request's session, forward B ends it; the others run outside any session."""
        first, last = self._forwards or (1, 0)
        if k == first:
            self.recorder.begin(local.n)
            local.begun = True
        failure = None
        try:
            with self.recorder.range(label):
                yield
        except BaseException as exc:
            failure = exit_reason(type(exc), exc)
            raise
        finally:
            if local.begun and not local.ended and (k == last or failure is not None):
                local.ended = True
                self.recorder.end(local.n, failure)

    def _too_short(self, n: int, forwards: int) -> None:
        schedule = self.recorder.schedule
        if schedule is not None and schedule.start == n and self.recorder.active:
            first, last = self._forwards or (1, 0)
            self.recorder.report("warning", "step", f"request {n} ran {forwards} forward(s): "
                                                    f"--profile-forwards {first}-{last} starts "
                                                    f"at its forward {first}, so nothing was "
                                                    f"recorded for it")

    def range(self, name: str) -> ContextManager[Any]:
        return self.recorder.range(name)

    def close(self, reason: str = "finished", detail: Optional[str] = None,
              wait_timeout: Optional[float] = None) -> None:
        """Flush and write the final manifest; says when the server stopped inside a window."""
        self.recorder.close(reason, detail or f"after {self.requests} requests",
                            wait_timeout=wait_timeout)

    def wait(self, timeout: Optional[float] = None) -> bool:
        return self.recorder.wait(timeout)

    def _final_notes(self, manifest: Manifest) -> None:
        """What only the driver knows, written with the final manifest (whoever closes: the
        driver, the exit flush, SIGTERM)."""
        manifest.set_served(self.requests)
        cut = self.recorder.cut_window()
        if cut is not None:
            manifest.set_window_cut(cut.start, cut.end, self.requests)
