"""megatron-core's dynamic inference engine (0.19): one engine step is the unit (DESIGN §6).

Targets (``engines/dynamic_engine.py`` and ``text_generation_controller.py``; line numbers of the
0.19.2 wheel in tests/harness/dynamic/FACTS.md):

- ``DynamicInferenceEngine.__init__``: arms the process's engine-step driver (a bad window, save
  path or budget is refused before the first step). An engine a ``StaticInferenceEngine`` builds
  for itself belongs to that engine's requests: it gets no driver of its own.
- ``DynamicInferenceEngine.async_step``: one engine step, numbered ``context.step_count + 1`` (the
  engine's own numbering, printed by its step log); its finished requests are noted.
- ``TextGenerationController.dummy_forward``: the server loop's dummy forward, which the engine
  counts as a step outside ``async_step``: a step of its own, labelled ``dummy``.
- ``TextGenerationController._dynamic_step_forward_logits``: each forward, a range labelled with
  what the context scheduled (``mixed 1p+2d 23t``).
- ``DynamicInferenceEngine.schedule_requests``: between steps, on the thread that runs the
  engine loop. Megatron 0.19 relays ``POST /start_profile``/``/stop_profile`` here
  (``START/STOP_CUDA_PROFILER``) and calls ``torch.cuda.cudart().cudaProfilerStart/Stop()`` on
  every rank of the replica in the same loop iteration. With profiling on, ``torch.cuda.cudart``
  answers inside this call with our signal handler instead: the start opens our window (its
  knobs travel in the signal's payload), the stop ends it; nsys's capture range is not touched.
  Without ``--profile`` nothing here is patched.
- ``DynamicInferenceEngine.run_engine_with_coordinator``: the serving loop; when it ends
  (SIGINT's cancellation, a stop, an error) the driver is closed on the loop's own thread.
- ``DynamicInferenceEngine._run_coroutine_sync``: ``step_modern`` inside a running event loop
  runs each step on a new thread: windows are then recorded one session per step.

Inside Megatron-RL's training loop (``state.training``) the iteration stays the unit: no driver.
"""

import asyncio
import atexit
import functools
import sys
import threading
import weakref

from mindspeed_prof import log, ranks
from mindspeed_prof.drivers.base import NULL_DRIVER
from mindspeed_prof.drivers.engine import EngineStepDriver
from mindspeed_prof.errors import ConfigError
from mindspeed_prof.exits import SIGNAL_FLUSH_TIMEOUT_S, exit_reason
from mindspeed_prof.http_control import engine_defaults, from_payload
from mindspeed_prof.patches import import_hooks
from mindspeed_prof.patches.engine_config import engine_config, megatron_args
from mindspeed_prof.patches.state import registry, state, usage_exit
from mindspeed_prof.patches.topology import distributed_args, rank_and_world, rank_layout

MODULE = "megatron.core.inference.engines.dynamic_engine"
ENGINE = f"{MODULE}.DynamicInferenceEngine"
CONTROLLER_MODULE = "megatron.core.inference.text_generation_controllers.text_generation_controller"
CONTROLLER = f"{CONTROLLER_MODULE}.TextGenerationController"
CUDART = "torch.cuda.cudart"

_lock = threading.Lock()
_relay = threading.local()  # .engine: the engine whose schedule_requests runs on this thread
_engine = None              # weakref to the engine the driver counts the steps of
# Rank 0 of a server: the routes' one-window state (profile_routes sets it before the fork).
control = None


def _ours(engine):
    return _engine is not None and _engine() is engine


def _start_driver(engine):
    global _engine
    rank, world = rank_and_world(megatron_args())
    config = engine_config(rank, world)
    if config is None or not config.profile or state.training:
        return
    args = megatron_args()
    try:
        layout = rank_layout(world) if ranks.needs_topology(config.profile_ranks) else None
        driver = EngineStepDriver(config, rank=rank, world_size=world,
                                  local_rank=getattr(args, "local_rank", None), layout_of=layout,
                                  parallel=distributed_args(args, rank, world) if args else None)
        driver.arm(planned=state.window_given)
    except ConfigError as exc:
        usage_exit(str(exc), rank=rank)
    state.train_hooked = True  # the chain is connected: engine steps reach the driver
    _engine = weakref.ref(engine)
    state.engine = driver
    registry.register(CUDART, mindspeed_prof_cudart_wrapper)
    registry.ensure(CUDART)  # at the engine's build: whatever stands in for cudart is in place
    atexit.register(_close_at_exit, driver)


def _close_at_exit(driver):
    from mindspeed_prof.exits import process_end_reason

    reason, detail = process_end_reason()
    driver.close(reason, detail or f"the process ended after {driver.steps} engine steps",
                 wait_timeout=SIGNAL_FLUSH_TIMEOUT_S)


def _step_ended(n):
    if control is not None:  # rank 0 of a server: what its routes must know
        control.unit_ended(n)
        control.flags_window(state.engine.recorder.planned_window_running)


def mindspeed_prof_dynamic_engine_init_wrapper(init):
    @functools.wraps(init)
    def init_then_arm(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if state.engine is NULL_DRIVER and not getattr(state.static_building, "depth", 0):
            with _lock:
                if state.engine is NULL_DRIVER:
                    _start_driver(self)

    return init_then_arm


def mindspeed_prof_engine_step_wrapper(async_step):
    @functools.wraps(async_step)
    async def engine_step(self, *args, **kwargs):
        driver = state.engine
        if driver is NULL_DRIVER or not _ours(self) or driver.in_step:
            return await async_step(self, *args, **kwargs)
        n = self.context.step_count + 1  # the engine adds 1 right after the forward
        with driver.step(n) as step:
            result = await async_step(self, *args, **kwargs)
            step.finished = [int(r.request_id) for r in result.get("finished_request_records", ())]
        _step_ended(n)
        return result

    return engine_step


def mindspeed_prof_dummy_forward_wrapper(dummy_forward):
    @functools.wraps(dummy_forward)
    def dummy_step(self, *args, **kwargs):
        driver = state.engine
        engine = _engine() if _engine is not None else None
        if driver is NULL_DRIVER or driver.in_step or engine is None \
                or engine.controller is not self:
            return dummy_forward(self, *args, **kwargs)
        n = engine.context.step_count + 1  # the loop adds 1 right after this returns
        with driver.dummy(n):
            result = dummy_forward(self, *args, **kwargs)
        _step_ended(n)
        return result

    return dummy_step


def mindspeed_prof_forward_logits_wrapper(forward_logits):
    @functools.wraps(forward_logits)
    def labelled_forward(self, *args, **kwargs):
        driver = state.engine
        if driver is NULL_DRIVER or not driver.in_step:
            return forward_logits(self, *args, **kwargs)
        dims = self.inference_wrapped_model.inference_context.batch_dimensions
        with driver.forward(prefill=int(dims.prefill_req_count),
                            decode=int(dims.decode_req_count), tokens=int(dims.token_count)):
            return forward_logits(self, *args, **kwargs)

    return labelled_forward


def mindspeed_prof_schedule_requests_wrapper(schedule_requests):
    @functools.wraps(schedule_requests)
    def schedule_with_profile_signals(self, *args, **kwargs):
        driver = state.engine
        if driver is NULL_DRIVER or not _ours(self):
            return schedule_requests(self, *args, **kwargs)
        _relay.engine = self
        try:
            return schedule_requests(self, *args, **kwargs)
        finally:
            _relay.engine = None
            driver.at_boundary()  # a close asked from another thread, even on an idle server

    return schedule_with_profile_signals


class _ProfileSignal:
    """What ``torch.cuda.cudart()`` returns inside a profiled engine's ``schedule_requests``:
    the relayed START/STOP opens or ends our window on this rank, between two steps."""

    def __init__(self, engine):
        self.engine = engine

    def cudaProfilerStart(self):  # noqa: N802 - cudart's name
        driver = state.engine
        request, generation = from_payload(_payload(sys._getframe(1)),
                                           *engine_defaults(driver.config))
        next_step = self.engine.context.step_count + 1
        if request is None:
            driver.recorder.report("error", "start", "a relayed start carried a payload that "
                                                     "is not mindspeed_prof's; ignored")
            return 0
        answer = driver.start_window(next_step, request)
        if control is not None:
            if answer == "busy":
                control.refused(generation)
            else:
                control.started(generation, next_step, request)
        if driver.rank == 0:
            log.info(f"POST /start_profile: {answer} before engine step {next_step} (delay "
                     f"{request.delay}, max {request.length or 'until /stop_profile'}"
                     f"{', prefix ' + request.prefix if request.prefix else ''})")
        return 0

    def cudaProfilerStop(self):  # noqa: N802
        driver = state.engine
        answer = driver.stop_window()
        if driver.rank == 0:
            log.info(f"POST /stop_profile: {answer} after engine step "
                     f"{self.engine.context.step_count}")
        return 0


def _payload(frame):
    """The relayed signal's payload after its header: ``schedule_requests`` unpacks each
    message into its local ``data`` (``[header, *args]``, dynamic_engine.py:2565 in 0.19.2)
    right before this call. () when it cannot be read (an engine that changed): defaults."""
    data = frame.f_locals.get("data") if frame is not None else None
    return list(data[1:]) if isinstance(data, (list, tuple)) and data else ()


def mindspeed_prof_cudart_wrapper(cudart):
    @functools.wraps(cudart)
    def cudart_or_profile_signal(*args, **kwargs):
        engine = getattr(_relay, "engine", None)
        if engine is None:
            return cudart(*args, **kwargs)
        return _ProfileSignal(engine)

    return cudart_or_profile_signal


def mindspeed_prof_engine_loop_wrapper(run_engine_with_coordinator):
    @functools.wraps(run_engine_with_coordinator)
    async def engine_loop_then_close(self, *args, **kwargs):
        driver = state.engine
        if driver is NULL_DRIVER or not _ours(self):
            return await run_engine_with_coordinator(self, *args, **kwargs)
        reason, detail = "finished", None
        try:
            return await run_engine_with_coordinator(self, *args, **kwargs)
        except asyncio.CancelledError:
            reason, detail = "interrupted", "the engine loop was cancelled (SIGINT, or shutdown)"
            raise
        except BaseException as exc:
            reason, detail = exit_reason(type(exc), exc)
            raise
        finally:
            # On the loop's own thread: a window that runs here is stopped and written here.
            driver.close(reason, detail, wait_timeout=SIGNAL_FLUSH_TIMEOUT_S)

    return engine_loop_then_close


def mindspeed_prof_sync_step_wrapper(run_coroutine_sync):
    @functools.wraps(run_coroutine_sync)
    def sync_step(self, *args, **kwargs):
        if state.engine is not NULL_DRIVER and _ours(self) and _loop_running():
            state.engine.steps_hop_threads()  # each step will run on a new thread
        return run_coroutine_sync(self, *args, **kwargs)

    return sync_step


def _loop_running():
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


TARGETS = (
    (f"{ENGINE}.__init__", mindspeed_prof_dynamic_engine_init_wrapper),
    (f"{ENGINE}.async_step", mindspeed_prof_engine_step_wrapper),
    (f"{ENGINE}.schedule_requests", mindspeed_prof_schedule_requests_wrapper),
    (f"{ENGINE}.run_engine_with_coordinator", mindspeed_prof_engine_loop_wrapper),
    (f"{ENGINE}._run_coroutine_sync", mindspeed_prof_sync_step_wrapper),
    (f"{CONTROLLER}.dummy_forward", mindspeed_prof_dummy_forward_wrapper),
    (f"{CONTROLLER}._dynamic_step_forward_logits", mindspeed_prof_forward_logits_wrapper),
)


def hook_dynamic_engine():
    """Patch the engine and controller when their modules load (now, if loaded): never
    imported here, so a process that builds no dynamic engine pays nothing."""
    for target, decorator in TARGETS:
        module = target.rsplit(".", 2)[0]
        if module in sys.modules:
            _patch(target, decorator)
        else:
            import_hooks.when_imported(module, functools.partial(_patch_late, target, decorator))


def _patch(target, decorator, through_mindspeed=True):
    owner = sys.modules.get(target.rsplit(".", 2)[0])
    cls = getattr(owner, target.rsplit(".", 2)[1], None)
    if cls is None or not hasattr(cls, target.rsplit(".", 1)[1]):
        return  # an older megatron-core without this method: nothing to hook there
    registry.register(target, decorator, through_mindspeed=through_mindspeed)
    registry.ensure(target)


def _patch_late(target, decorator, module):
    _patch(target, decorator, through_mindspeed=False)
