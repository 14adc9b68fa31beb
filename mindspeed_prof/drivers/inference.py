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

Megatron's server runs each request on a new Flask thread on rank 0 (the main thread elsewhere),
and a profiler session records, steps and stops only on the thread that started it, so every
request of a window is recorded as its own session in its own ``req_{n}-{n}/`` folder. The
driver counts (``requests``); the recorder records. A ``generate`` called from inside another
(MindSpeed-LLM's ``generate`` over Megatron's engine) is part of the outer request, and a forward
inside another forward (a legacy ``ForwardStep`` under an engine's) is one labelled forward.

A request is the whole generation however it is consumed: ``serve(generate, args, kwargs)``
keeps the request open while the iterator ``generate`` returns is consumed (MindSpeed-LLM's
``generate(stream=True)`` computes every token as its caller iterates). It ends when the iterator
is exhausted; an exception raised while iterating, or the caller closing (or dropping) it before
its end, cuts the request. Its session runs on the thread that began it; consumption on another
thread is not recorded, and the request is cut when its own thread next begins one (or at exit).

With ``--profile-forwards A-B`` a request's session opens at its forward A and ends after its
forward B (verl's ``profile_token_start/end``: a decode window inside each request); its step id
is still the request's number.
"""

import contextlib
import dataclasses
import threading
from collections.abc import Iterator as LazyResult
from typing import Any, Callable, ContextManager, Iterator, Optional, Tuple

from ..config.profiler_config import ProfilerConfig
from ..recording.exits import exit_reason
from ..recording.manifest import Manifest
from ..recording.recorder import WindowRecorder
from ..config.units import REQUEST
from .base import NULL_DRIVER, RecorderView
from .streams import ABANDONED, Advancing, Stream

PREFILL = "prefill"
DECODE = "decode"
# What ends when an offline script (MindSpeed-LLM's inference.py, an engine loop) stops: messages
# say "the inference process stopped ...", "the server stopped ..." only for a server.
OFFLINE_REQUEST = dataclasses.replace(REQUEST, owner="the inference process")


class RequestDriver(RecorderView):
    def __init__(self, config: ProfilerConfig, *, rank: int = 0, world_size: int = 1,
                 local_rank: Optional[int] = None, layout_of: Any = None,
                 parallel: Optional[dict] = None, server: bool = True) -> None:
        """``server``: the host serves requests (Megatron's text-generation server) rather than
        running them offline; only the words of its messages depend on it."""
        self.recorder = WindowRecorder(config, rank=rank, world_size=world_size,
                                       local_rank=local_rank, layout_of=layout_of,
                                       parallel=parallel,
                                       unit=REQUEST if server else OFFLINE_REQUEST,
                                       session_per_unit=True,
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
            self.serve = NULL_DRIVER.serve  # type: ignore

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
        if depth:
            yield None
            return
        n = self._begin(local)
        local.depth = 1
        failure = None
        try:
            yield n
        except BaseException as exc:
            failure = exit_reason(type(exc), exc)
            raise
        finally:
            local.depth = 0
            self._unit_ends(local, n, failure)  # a request's session stops here, signals held

    def serve(self, work: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """``work(*args, **kwargs)`` as one request. When it returns an iterator (a generation
        streamed to its caller), the request stays open until the caller has consumed it."""
        local = self._local
        if getattr(local, "depth", 0):
            return work(*args, **kwargs)  # inside another request: part of it, however consumed
        n = self._begin(local)
        local.depth = 1
        try:
            result = work(*args, **kwargs)
        except BaseException as exc:
            local.depth = 0
            self._unit_ends(local, n, exit_reason(type(exc), exc))
            raise
        local.depth = 0
        if not isinstance(result, LazyResult):
            self._unit_ends(local, n, None)
            return result
        local.open = stream = Stream(n, threading.get_ident())
        return self._consumed(stream, Advancing(local, stream, result))

    def _begin(self, local: Any) -> int:
        self._settle(local)
        with self._lock:
            self.requests += 1
            n = self.requests
        local.forwards, local.n = 0, n
        # --profile-forwards A-B: the request's session opens at its forward A, not here.
        local.begun, local.ended = self._forwards is None, False
        if local.begun:
            self.recorder.begin(n)
        return n

    def _unit_ends(self, local: Any, n: int, failure: Optional[tuple], fatal: bool = True
                   ) -> None:
        if getattr(local, "n", n) != n or getattr(local, "begun", True):
            if not getattr(local, "ended", False):
                if fatal:
                    self.recorder.end(n, failure)
                else:
                    self.recorder.end(n, failure, fatal=False)
        else:
            self._too_short(n, local.forwards)
        local.ended = True

    def _too_short(self, n: int, forwards: int) -> None:
        schedule = self.recorder.schedule
        if self._forwards and schedule is not None and schedule.start == n \
                and self.recorder.active:
            first, last = self._forwards
            self.recorder.report("warning", "step", f"request {n} ran {forwards} forward(s): "
                                                    f"--profile-forwards {first}-{last} starts "
                                                    f"at its forward {first}, so nothing was "
                                                    f"recorded for it")

    def _consumed(self, stream: "Stream", items: "Advancing") -> Iterator[Any]:
        """The caller's view of a streamed request: the same items; the request ends with them."""
        failure: Optional[tuple] = (ABANDONED, "its output stream was closed before its end")
        try:
            result = yield from items
            failure = None
            return result
        except GeneratorExit:
            raise
        except BaseException as exc:
            failure = exit_reason(type(exc), exc)
            raise
        finally:
            self._end_stream(stream, failure)

    def _end_stream(self, stream: "Stream", failure: Optional[tuple]) -> None:
        if stream.done:
            return
        if threading.get_ident() != stream.thread:
            # Its session can only be stopped on its own thread: that thread settles it when it
            # begins its next request (or the exit flush cuts it).
            stream.elsewhere = stream.elsewhere or threading.get_ident()
            return
        stream.done, self._local.open = True, None
        self._end(stream.n, stream.cut_elsewhere() or failure)

    def _settle(self, local: Any) -> None:
        """A streamed request of this thread still open when the thread begins another is cut."""
        stream = getattr(local, "open", None)
        if stream is None:
            return
        stream.done, local.open = True, None
        self._end(stream.n, stream.cut_elsewhere() or (
            ABANDONED, f"its output stream was left unfinished when request "
                       f"{self.requests + 1} began"))

    def _end(self, n: int, failure: Optional[tuple]) -> None:
        self._unit_ends(self._local, n, failure,
                        fatal=failure is None or failure[0] != ABANDONED)

    def forward(self) -> ContextManager[Any]:
        """A labelled range around one forward of the running request (a no-op outside one,
        and inside another forward: an engine's forward over a legacy one is one forward)."""
        local = self._local
        if not getattr(local, "depth", 0) or getattr(local, "in_forward", False):
            return NULL_DRIVER.range(PREFILL)
        first = local.forwards == 0
        local.forwards += 1
        return self._labelled(local, PREFILL if first else DECODE, local.forwards)

    @contextlib.contextmanager
    def _labelled(self, local: Any, name: str, k: int) -> Iterator[None]:
        """Forward ``k`` of the request; under ``--profile-forwards A-B`` forward A begins the
        request's session and forward B ends it."""
        window = self._forwards
        if window is not None and k == window[0] and not local.begun:
            self.recorder.begin(local.n)
            local.begun = True
        local.in_forward = True
        failure = None
        try:
            with self.recorder.range(name):
                yield
        except BaseException as exc:
            failure = exit_reason(type(exc), exc)
            raise
        finally:
            local.in_forward = False
            if window is not None and local.begun and not local.ended \
                    and (k == window[1] or failure is not None):
                local.ended = True
                self.recorder.end(local.n, failure)

    def range(self, name: str) -> ContextManager[Any]:
        return self.recorder.range(name)

    def close(self, reason: str = "finished", detail: Optional[str] = None,
              wait_timeout: Optional[float] = None) -> None:
        """Flush and write the final manifest; says when the server stopped inside a window."""
        self.recorder.close(reason, detail or f"after {self.requests} requests",
                            wait_timeout=wait_timeout)

    def _final_notes(self, manifest: Manifest) -> None:
        """What only the driver knows, written with the final manifest (whoever closes: the
        driver, the exit flush, SIGTERM)."""
        manifest.set_served(self.requests)
        cut = self.recorder.cut_window()
        if cut is not None:
            manifest.set_window_cut(cut.start, cut.end, self.requests)
