"""megatron-core's dynamic inference engine (0.17-0.19): one engine step is the unit (DESIGN §6).

Targets (``engines/dynamic_engine.py`` and ``text_generation_controller.py``; line numbers of the
0.19.2 wheel in tests/harness/dynamic/FACTS.md):

- ``DynamicInferenceEngine.__init__``: arms the process's engine-step driver (a bad window, save
  path or budget is refused before the first step). An engine a ``StaticInferenceEngine`` builds
  for itself belongs to that engine's requests: it gets no driver of its own.
- ``DynamicInferenceEngine.async_step``: one engine step, numbered ``context.step_count + 1`` (the
  engine's own numbering, printed by its step log; on 0.18.2, whose dummy forward zeroes it,
  continued across the reset: :func:`next_step`); its finished requests are noted.
- ``TextGenerationController.dummy_forward``: the server loop's dummy forward, which the engine
  counts as a step outside ``async_step``: a step of its own, labelled ``dummy``.
- ``TextGenerationController._dynamic_step_forward_logits``: each forward, a range labelled with
  what the context scheduled (``mixed 1p+2d 23t``).
- ``DynamicInferenceEngine.schedule_requests``: between steps, on the thread that runs the
  engine loop: where an HTTP start or stop reaches each rank (``patches/dynamic_control.py``:
  0.19's relayed ``START/STOP_CUDA_PROFILER`` answered through ``torch.cuda.cudart``, or, on
  0.17/0.18, one broadcast of rank 0's commands after it). Without ``--profile`` nothing here
  is patched.
- ``DynamicInferenceEngine.run_engine_with_coordinator``: the serving loop; when it ends
  (SIGINT's cancellation, a stop, an error) the driver is closed on the loop's own thread.
- ``DynamicInferenceEngine._run_coroutine_sync``: ``step_modern`` inside a running event loop
  runs each step on a new thread: windows are then recorded one session per step.

Inside Megatron-RL's training loop (``state.training``) the iteration stays the unit: no driver.
Megatron-core 0.17.1 and 0.18.2 have the same targets, names and ``context.step_count``; an
engine before 0.17 (``engine.step_count``) is refused at its build (``dynamic_control``).
"""

import asyncio
import atexit
import functools
import sys
import threading
import weakref

from mindspeed_prof.config import ranks
from mindspeed_prof.drivers.base import NULL_DRIVER
from mindspeed_prof.drivers.engine import EngineStepDriver
from mindspeed_prof.errors import ConfigError
from mindspeed_prof.recording.exits import SIGNAL_FLUSH_TIMEOUT_S, exit_reason
from mindspeed_prof.patches import dynamic_control, import_hooks, serving
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
_broadcast_relay = False    # 0.17/0.18: HTTP commands reach every rank after schedule_requests
# The engine being counted, its step numbering and the server's window state: patches/serving.py
next_step = serving.next_step


def _ours(engine):
    return engine is not None and serving.counted_engine() is engine


def _start_driver(engine):
    global _broadcast_relay
    rank, world = rank_and_world(megatron_args())
    config = engine_config(rank, world)
    if config is None or not config.profile or state.training:
        return
    dynamic_control.refuse_unsupported(engine, rank)  # before 0.17: exit 2, never a no-op
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
    serving.engine_ref = weakref.ref(engine)
    _broadcast_relay = not dynamic_control.signals_relayed() and dynamic_control.one_replica(engine)
    state.engine = driver
    registry.register(CUDART, mindspeed_prof_cudart_wrapper)
    registry.ensure(CUDART)  # at the engine's build: whatever stands in for cudart is in place
    atexit.register(_close_at_exit, driver)


def _close_at_exit(driver):
    from mindspeed_prof.recording.exits import process_end_reason

    reason, detail = process_end_reason()
    driver.close(reason, detail or f"the process ended after {driver.steps} engine steps",
                 wait_timeout=SIGNAL_FLUSH_TIMEOUT_S)


def _step_ended(n):
    control = serving.control
    if control is not None:  # rank 0 of a server: what its routes must know
        recorder = state.engine.recorder
        control.unit_ended(n, recorder.asked_window_pending)
        control.flags_window(recorder.planned_window_running)


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
        n = next_step(self)  # the engine adds 1 to step_count right after the forward
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
        engine = serving.counted_engine()
        if driver is NULL_DRIVER or driver.in_step or engine is None \
                or engine.controller is not self:
            return dummy_forward(self, *args, **kwargs)
        before, n = engine.context.step_count, next_step(engine)  # the loop adds 1 after it
        with driver.dummy(n):
            result = dummy_forward(self, *args, **kwargs)
        if engine.context.step_count == 0:  # 0.18.2: reset inside; the engine's next is 1
            serving.lost += before
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
            received = schedule_requests(self, *args, **kwargs)
        finally:
            _relay.engine = None
            driver.at_boundary()  # a close asked from another thread, even on an idle server
        # 0.17/0.18: rank 0's HTTP commands on every rank, only after a drain every rank made
        # (a SIGINT inside it must not leave one rank waiting in the broadcast).
        if _broadcast_relay:
            dynamic_control.relay_at_boundary(self)
            driver.at_boundary()
        return received

    return schedule_with_profile_signals


def mindspeed_prof_cudart_wrapper(cudart):
    @functools.wraps(cudart)
    def cudart_or_profile_signal(*args, **kwargs):
        engine = getattr(_relay, "engine", None)
        if engine is None:
            return cudart(*args, **kwargs)
        return dynamic_control.ProfileSignal(engine)

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
