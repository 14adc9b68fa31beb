"""How an HTTP start or stop reaches every rank of megatron-core's dynamic engine, by version.

The routes (``patches/profile_routes.py``) answer in a front end, a process forked from rank 0;
the window opens on each engine rank between two steps, on the thread that runs the engine loop.

- **0.19** relays ``POST /start_profile``/``/stop_profile`` itself: front end -> data-parallel
  coordinator -> every engine rank's ``schedule_requests``, which calls
  ``torch.cuda.cudart().cudaProfilerStart/Stop()`` (``START/STOP_CUDA_PROFILER``). With
  ``--profile``, ``torch.cuda.cudart`` answers inside that call with :class:`ProfileSignal`: the
  start opens our window (its knobs travel in the signal's payload), the stop ends it.
- **0.17 and 0.18** have neither the routes nor those headers (their ``Headers`` end at
  ``SHUTDOWN``; the coordinator raises ``UnknownHeaderError`` on any other, and relays only
  PAUSE/UNPAUSE/SUSPEND/RESUME/SET_GENERATION_EPOCH/STOP, each of which changes the engine).
  The routes then write the command into a pipe made by rank 0 before it forks the front ends
  (one JSON line, an atomic write); after each ``schedule_requests`` (every rank, in lockstep:
  the engine's own model-parallel exchange) rank 0 reads it and every rank takes it from one
  broadcast (the trigger's JSON exchange: nothing received is executed). The broadcast spans
  the world, so it needs one model replica (data-parallel size 1); with more, a job with no
  window flag is refused at the engine's build (nothing could ever open a window) and a server
  with window flags serves without the routes, saying so.
- **Before 0.17** (0.16: the engine counts ``engine.step_count``, not ``context.step_count``,
  and its server is Flask's): an engine built with ``--profile`` is refused at start-up.
"""

import errno
import importlib.metadata
import json
import os
import sys
from typing import List, Optional

from mindspeed_prof.control import http_control
from mindspeed_prof import log
from mindspeed_prof.patches import serving
from mindspeed_prof.patches.state import state, usage_exit

_mailbox: Optional[List[int]] = None  # [read fd, write fd] on rank 0 of a 0.17/0.18 server
_rest = b""                           # a line read in part (never, with atomic writes)


def core_version() -> str:
    try:
        return importlib.metadata.version("megatron-core")
    except importlib.metadata.PackageNotFoundError:
        return "(unknown version)"


def signals_relayed() -> bool:
    """The host relays START/STOP_CUDA_PROFILER to every engine rank (megatron-core 0.19)."""
    from megatron.core.inference.headers import Headers

    return hasattr(Headers, "START_CUDA_PROFILER")


def refuse_unsupported(engine, rank: int) -> None:
    """At the engine's build, on every rank (before a coordinator or a front end exists): an
    engine whose steps we cannot number, or a 0.17/0.18 job of several model replicas with no
    window flag (only HTTP could open one, and it cannot reach them), is refused (exit 2)."""
    if not hasattr(getattr(engine, "context", None), "step_count"):
        usage_exit(f"megatron-core {core_version()}'s DynamicInferenceEngine is not supported by "
                   f"--profile (it numbers its steps in engine.step_count and serves through "
                   f"Flask): the dynamic engine is profiled from megatron-core 0.17 (0.17.1, "
                   f"0.18.2, 0.19); upgrade megatron-core, or profile the static engine "
                   f"(StaticInferenceEngine)", rank=rank)
    if not state.window_given and not signals_relayed() and not one_replica(engine):
        usage_exit(f"--profile with no window flags waits for POST /start_profile, but "
                   f"{_NO_RELAY.format(core_version())}: give a window (--profile-step-start/"
                   f"--profile-step-end, --profile-steps) or upgrade megatron-core to 0.19",
                   rank=rank)


_NO_RELAY = ("megatron-core {}'s dynamic server has no /start_profile relay across "
             "data-parallel replicas (megatron-core 0.19 has one)")


def one_replica(engine) -> bool:
    """Every rank of the world is one model-parallel group: the broadcast can stay in step."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return True
    try:
        return dist.get_world_size(group=engine.pg_collection.mp) == dist.get_world_size()
    except (AttributeError, RuntimeError, ValueError):
        return False


def open_mailbox(engine) -> bool:
    """Rank 0 of a 0.17/0.18 server, before its front ends fork: the routes' pipe. False (and
    the routes are not added) with more than one model replica: the windows come from the
    flags (with none, :func:`refuse_unsupported` stopped the job at the engine's build)."""
    global _mailbox
    if engine is not None and not one_replica(engine):
        log.warning(f"{_NO_RELAY.format(core_version())}: the windows come from the profiling "
                    f"flags only; POST /start_profile and /stop_profile are not added")
        return False
    if _mailbox is None:
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)  # a front end never waits on a stuck engine
        _mailbox = [read, write]
    return True


def routes_ready() -> bool:
    """Rank 0 of a server with ``--profile``, before its front ends fork: 0.19 relays the
    routes' signal; 0.17/0.18 take the routes' pipe, made now (:func:`open_mailbox`)."""
    if signals_relayed():
        return True
    return open_mailbox(serving.counted_engine())


def send(client, kind: str, generation: int, request=None) -> Optional[str]:
    """A route's command to every engine rank (0.19's relayed signal, or the pipe); None once
    sent, else why not."""
    from megatron.core.inference.headers import Headers

    if not hasattr(Headers, "START_CUDA_PROFILER"):
        return post(kind, generation, request)
    if kind == "start":
        client._send_signal_to_engines(Headers.START_CUDA_PROFILER,
                                       http_control.payload(request, generation))
    else:
        client._send_signal_to_engines(Headers.STOP_CUDA_PROFILER,
                                       {http_control.PAYLOAD_KEY: 1, "generation": generation})
    return None


def post(kind: str, generation: int, request=None) -> Optional[str]:
    """A route's command, in a front end; None once written, else why not (the route's 503)."""
    line = {"kind": kind, "generation": generation}
    if request is not None:
        line.update(delay=request.delay, max=request.length, prefix=request.prefix)
    data = (json.dumps(line) + "\n").encode()
    try:
        os.write(_mailbox[1], data)  # type: ignore[index]  # < PIPE_BUF: one atomic write
    except (TypeError, OSError) as exc:
        return f"the engine's rank 0 does not take commands now ({exc}); try again"
    return None


def _take() -> list:
    global _rest
    if _mailbox is None:
        return []
    data = _rest
    while True:
        try:
            chunk = os.read(_mailbox[0], 65536)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                break
            raise
        if not chunk:
            break
        data += chunk
    *lines, _rest = data.split(b"\n")
    return [json.loads(line) for line in lines if line.strip()]


def relay_at_boundary(engine) -> None:
    """Every rank of a 0.17/0.18 engine loop, after ``schedule_requests``: rank 0's commands."""
    from mindspeed_prof.patches.topology import rank_and_world

    rank, world = rank_and_world(None)
    commands = serving.from_rank0(_take() if rank == 0 else None, rank, world) or []
    for command in commands:
        if command.get("kind") == "start":
            apply_start(engine, http_control.start_request(
                {k: command.get(k) for k in ("delay", "max", "prefix")}),
                command.get("generation"))
        else:
            apply_stop(engine)


def apply_start(engine, request, generation) -> None:
    """A start reached this rank before the engine's next step."""
    driver, control = state.engine, serving.control
    next_step = serving.next_step(engine)
    answer = driver.start_window(next_step, request)
    if control is not None:
        control.answered(generation, answer, next_step, request)
    if driver.rank == 0:
        if answer == "not recorded here":
            answer = (f"window {generation} relayed to the profiled ranks (rank 0 is not one "
                      f"of --profile-ranks)")
        log.info(f"POST /start_profile: {answer} before engine step {next_step} (delay "
                 f"{request.delay}, max {request.length or 'until /stop_profile'}"
                 f"{', prefix ' + request.prefix if request.prefix else ''})")


def apply_stop(engine) -> None:
    driver = state.engine
    answer = driver.stop_window()
    if driver.rank == 0:
        log.info(f"POST /stop_profile: {answer} after engine step "
                 f"{serving.next_step(engine) - 1}")


class ProfileSignal:
    """What ``torch.cuda.cudart()`` returns inside a profiled 0.19 engine's
    ``schedule_requests``: the relayed START/STOP opens or ends our window on this rank."""

    def __init__(self, engine):
        self.engine = engine

    def cudaProfilerStart(self):  # noqa: N802 - cudart's name
        request, generation = http_control.from_payload(
            _payload(sys._getframe(1)), *http_control.engine_defaults(state.engine.config))
        if request is None:
            state.engine.recorder.report("error", "start", "a relayed start carried a payload "
                                                           "that is not mindspeed_prof's; ignored")
            return 0
        apply_start(self.engine, request, generation)
        return 0

    def cudaProfilerStop(self):  # noqa: N802
        apply_stop(self.engine)
        return 0


def _payload(frame):
    """The relayed signal's payload after its header: ``schedule_requests`` unpacks each
    message into its local ``data`` (``[header, *args]``, dynamic_engine.py:2565 in 0.19.2)
    right before this call. () when it cannot be read (an engine that changed): defaults."""
    data = frame.f_locals.get("data") if frame is not None else None
    return list(data[1:]) if isinstance(data, (list, tuple)) and data else ()
