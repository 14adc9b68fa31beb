"""The engine-step driver: megatron-core's dynamic inference engine, one engine step as the unit.

An engine step is one ``DynamicInferenceEngine.async_step`` (what ``run_engine_with_coordinator``,
``run_engine``, ``step_modern`` and ``generate`` all await), or one dummy forward the server's
loop runs when its cached consensus says another rank has work (the engine counts it in
``context.step_count`` outside ``async_step``). Steps carry the engine's own numbers:
``context.step_count`` after the step (1, 2, ...; the engine's step log prints the same), so the
trace's step ids, the manifest and the engine's log agree; a dummy forward is a step of its own,
labelled ``dummy``, carrying no request::

    driver = EngineStepDriver(config, rank=r, world_size=w)
    driver.arm(planned=window_given)          # no window flags: wait for an HTTP start
    with driver.step(n) as step:              # one engine step, on the thread that computes
        with driver.forward(prefill=1, decode=2, tokens=23):   # "mixed 1p+2d 23t"
            model(...)
        step.finished = [request ids]
    driver.start_window(n, request)           # an HTTP start, between two steps
    driver.stop_window()                      # an HTTP stop, between two steps
    driver.close("finished")

Each recorded step's composition (prefill / decode / mixed, requests, tokens), latency and the
requests that finished in it go into its window's manifest entry (``units``). Sessions: one per
window, on the thread that runs the engine loop (the main thread for Megatron's tool and
``run_engine_with_coordinator``; ``MegatronLLM``'s runtime thread). ``step_modern`` called inside
a running event loop runs each step on a new thread: ``steps_hop_threads()`` then records every
window one session per step (``estep_{n}-{n}/``), as the request driver does.
"""

import contextlib
import threading
import time
from typing import Any, Dict, Iterator, List, Optional

from ..config.profiler_config import ProfilerConfig
from ..recording.exits import exit_reason
from ..recording.manifest import Manifest
from ..config.window import WindowRequest
from ..recording.recorder import WindowRecorder
from ..config.units import ENGINE_STEP
from .base import NULL_DRIVER, RecorderView

DUMMY = "dummy"


def step_kind(prefill: int, decode: int) -> str:
    """``prefill``, ``decode`` or ``mixed``, from the requests one forward carried."""
    if prefill and decode:
        return "mixed"
    return "prefill" if prefill else "decode"


def forward_label(prefill: int, decode: int, tokens: int) -> str:
    """The range name of one forward: its kind, how many requests of each kind, its tokens."""
    return f"{step_kind(prefill, decode)} {prefill}p+{decode}d {tokens}t"


class Step:
    """What one engine step carried, filled in while it runs."""

    __slots__ = ("n", "forwards", "finished")

    def __init__(self, n: int) -> None:
        self.n = n
        self.forwards: List[Dict[str, Any]] = []
        self.finished: List[int] = []

    def info(self, latency_s: float) -> Dict[str, Any]:
        info: Dict[str, Any] = {"latency_ms": round(latency_s * 1000.0, 3)}
        if self.forwards:
            last = self.forwards[-1]
            info.update(kind=last["kind"], prefill_requests=last["prefill"],
                        decode_requests=last["decode"],
                        tokens=sum(f["tokens"] for f in self.forwards))
            if len(self.forwards) > 1:
                info["forwards"] = len(self.forwards)
        if self.finished:
            info["finished_requests"] = list(self.finished)
        return info


class EngineStepDriver(RecorderView):
    """Engine steps of one process's dynamic engine into a window recorder (see the module)."""

    def __init__(self, config: ProfilerConfig, *, rank: int = 0, world_size: int = 1,
                 local_rank: Optional[int] = None, layout_of: Any = None,
                 parallel: Optional[dict] = None) -> None:
        self.recorder = WindowRecorder(config, rank=rank, world_size=world_size,
                                       local_rank=local_rank, layout_of=layout_of,
                                       parallel=parallel, unit=ENGINE_STEP,
                                       on_final_manifest=self._final_notes,
                                       own_folders=True)  # HTTP windows come one after another
        self.config = config
        self.steps = 0        # engine steps this process ran (async steps and dummy forwards)
        self.last_step: Optional[int] = None
        self._local = threading.local()  # the step running on this thread
        self._hop_said = False
        self.begin, self.end, self.range = (self.recorder.begin, self.recorder.end,
                                            self.recorder.range)
        if self.recorder.idle:
            self.forward = lambda **_: NULL_DRIVER.range("")  # type: ignore[method-assign]

    def arm(self, planned: bool = True) -> None:
        """Plan the windows in engine steps (``planned=False``: none was asked for; an HTTP
        start opens one). The engine has no known last step."""
        self.recorder.arm(first=1, last=None, planned=planned)

    # -- the engine's calls (on the thread that computes) --------------------------------------

    @property
    def in_step(self) -> bool:
        """A step runs on this thread now."""
        return getattr(self._local, "step", None) is not None

    @contextlib.contextmanager
    def step(self, n: int) -> Iterator[Step]:
        """Engine step ``n``; one that raises is cut (its window too)."""
        step = Step(n)
        self._local.step = step
        self.steps += 1
        self.last_step = n
        recorder = self.recorder
        recorder.begin(n)
        started = time.perf_counter()
        failure = None
        try:
            yield step
        except BaseException as exc:
            failure = exit_reason(type(exc), exc)
            raise
        finally:
            self._local.step = None
            if failure is None:
                recorder.note(n, step.info(time.perf_counter() - started))
            recorder.end(n, failure)

    @contextlib.contextmanager
    def dummy(self, n: int) -> Iterator[None]:
        """A dummy forward the engine loop counts as step ``n`` (no request, the collective's
        share of a rank without work)."""
        with self.step(n) as step:
            step.forwards.append({"kind": DUMMY, "prefill": 0, "decode": 0, "tokens": 0})
            with self.recorder.range(DUMMY):
                yield

    def forward(self, *, prefill: int, decode: int, tokens: int) -> Any:
        """A labelled range around one forward of the running step (its composition as the
        context scheduled it)."""
        step = getattr(self._local, "step", None)
        if step is not None and step.forwards and step.forwards[0]["kind"] == DUMMY:
            return NULL_DRIVER.range("")  # the dummy forward's own: inside its "dummy" range
        if step is not None:
            step.forwards.append({"kind": step_kind(prefill, decode), "prefill": prefill,
                                  "decode": decode, "tokens": tokens})
        return self.recorder.range(forward_label(prefill, decode, tokens))

    def steps_hop_threads(self) -> None:
        """Each step will run on a new thread: one session per step from now on (said once when
        a window already records on one thread: that one cannot follow)."""
        if not self.recorder.split_per_unit() and not self._hop_said:
            self._hop_said = True
            self.recorder.report("warning", "step", "engine steps now run on a new thread each "
                                                    "(step_modern inside a running event "
                                                    "loop) while a window records on one "
                                                    "thread: its steps on other threads are not "
                                                    "recorded")

    # -- windows asked for while the engine runs ----------------------------------------------

    def start_window(self, next_step: int, request: WindowRequest) -> str:
        """An HTTP start reached this rank before step ``next_step``."""
        return self.recorder.request_window(next_step, request)

    def stop_window(self) -> str:
        return self.recorder.stop_window()

    @property
    def window_running(self) -> bool:
        return self.recorder.window_running

    def at_boundary(self) -> None:
        """Between two steps on the computing thread (the engine loop's every iteration)."""
        self.recorder.at_boundary()

    def close(self, reason: str = "finished", detail: Optional[str] = None,
              wait_timeout: Optional[float] = None, wait: bool = True) -> None:
        self.recorder.close(reason, detail or f"after {self.steps} engine steps",
                            wait_timeout=wait_timeout, wait=wait)

    def _final_notes(self, manifest: Manifest) -> None:
        manifest.set_units_run(self.steps, self.last_step)
