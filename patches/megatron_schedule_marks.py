"""What every pipeline schedule shares: its forward and backward steps, its sends and receives,
the gradient and parameter synchronisation and the optimizer, marked while a window records.

The schedule families (``megatron_schedule_no_pipelining``, ``megatron_schedule_1f1b``,
``megatron_schedule_interleaved``) wrap Megatron's schedule functions: each call opens a
``forward-backward`` mark and a ``ScheduleCall`` that the pieces below read (stage, chunk,
microbatch). Outside a recording window a schedule call costs one attribute read, and every
piece one global read: nothing is marked, nothing is counted. Names: ``config/schedule_marks.py``.
The marks themselves are the backend's (``Backend.mark``, reached through the training driver);
the microbatches' compute goes on the NPU's device stream, the rest stays on the host.

Versions are told apart by what the installed megatron-core has (``P2PCommunicator``'s methods
from 0.14 on, module functions before; ``vp_stage=`` on ``forward_step`` from 0.13 on, the
virtual rank in ``parallel_state`` before), never by comparing version numbers.
"""

import functools
import importlib
from typing import Any, Callable, Dict, List, Optional, Tuple

from mindspeed_prof.config import schedule_marks as sm
from mindspeed_prof.patches.state import state
from mindspeed_prof.recording.session import window_recording

SCHEDULES = "megatron.core.pipeline_parallel.schedules"
P2P = "megatron.core.pipeline_parallel.p2p_communication"
DDP = "megatron.core.distributed.distributed_data_parallel.DistributedDataParallel"
OPTIMIZERS = "megatron.core.optimizer.optimizer"
FORWARD_STEP = f"{SCHEDULES}.forward_step"
BACKWARD_STEP = f"{SCHEDULES}.backward_step"

# p2p call -> (its timer, the neighbour it talks to: "next", "prev" or None for both ways)
P2P_CALLS = {
    "recv_forward": (sm.FORWARD_RECV, "prev"),
    "send_forward": (sm.FORWARD_SEND, "next"),
    "recv_backward": (sm.BACKWARD_RECV, "next"),
    "send_backward": (sm.BACKWARD_SEND, "prev"),
    "send_forward_recv_backward": (sm.FORWARD_SEND_BACKWARD_RECV, "next"),
    "send_backward_recv_forward": (sm.BACKWARD_SEND_FORWARD_RECV, "prev"),
    "send_forward_recv_forward": (sm.FORWARD_SEND_FORWARD_RECV, None),
    "send_backward_recv_backward": (sm.BACKWARD_SEND_BACKWARD_RECV, None),
    "send_forward_backward_recv_forward_backward": (sm.FORWARD_BACKWARD_SEND_RECV, None),
}
OPTIMIZER_CLASSES = ("MixedPrecisionOptimizer", "FP32Optimizer", "ChainedOptimizer",
                     "DistributedOptimizer")


def recording_driver() -> Any:
    """The training driver when a window records on this process, else None. The one place
    that asks (the recorder's ``window_recording``: one attribute read); the driver's own mark
    is a no-op where the window recording is not its own (an inference request's)."""
    return state.manager if window_recording() else None


def _parallel_state() -> Any:
    return importlib.import_module("megatron.core.parallel_state")


def _stage() -> int:
    try:
        return int(_parallel_state().get_pipeline_model_parallel_rank())
    except Exception:  # noqa: BLE001 - no pipeline group (a plain script): one stage
        return 0


def _neighbours() -> Tuple[Optional[int], Optional[int]]:
    ps = _parallel_state()
    try:
        return int(ps.get_pipeline_model_parallel_next_rank()), \
            int(ps.get_pipeline_model_parallel_prev_rank())
    except Exception:  # noqa: BLE001 - no pipeline group: nobody to talk to
        return None, None


class ScheduleCall:
    """One training schedule call on this rank (one step): where it runs and what it ran."""

    __slots__ = ("driver", "stage", "chunks", "next_rank", "prev_rank", "forwards", "pending",
                 "in_p2p")

    def __init__(self, driver: Any, chunks: int) -> None:
        self.driver, self.chunks, self.stage = driver, chunks, _stage()
        self.next_rank, self.prev_rank = _neighbours() if self._pipelined() else (None, None)
        self.forwards: Dict[int, int] = {}  # chunk -> forwards run so far this step
        # id(output of a forward) -> (chunk, mb): the backward of that output is the same
        # microbatch (every schedule hands the forward's output object to its backward)
        self.pending: Dict[int, Tuple[int, int]] = {}
        self.in_p2p = False

    @staticmethod
    def _pipelined() -> bool:
        try:
            return int(_parallel_state().get_pipeline_model_parallel_world_size()) > 1
        except Exception:  # noqa: BLE001
            return False

    def chunk(self, kwargs: dict) -> int:
        chunk = kwargs.get("vp_stage")
        if chunk is None and self.chunks > 1:  # before vp_stage=: the schedule set it globally
            chunk = _parallel_state().get_virtual_pipeline_model_parallel_rank()
        return int(chunk or 0)

    def next_forward(self, chunk: int) -> int:
        mb = self.forwards.get(chunk, 0)
        self.forwards[chunk] = mb + 1
        return mb


_call: Optional[ScheduleCall] = None  # the schedule call running on the training thread
# The driver that marked this step's schedule call, kept until the next one: the optimizer and
# the gradient/parameter synchronisation after the schedule are marked in the same steps, and
# outside windows they read one global instead of asking the driver.
_step_driver: Any = None


def family_of(family: str, schedule: Callable[..., Any]) -> str:
    """``family`` for Megatron's own schedule; ``replaced`` for one another package registered
    under its name (MindSpeed's DualPipeV under 1F1B's): its shape is not the family's."""
    module = getattr(schedule, "__module__", None) or ""
    return family if module.startswith("megatron.") else sm.REPLACED


def run_schedule(family: str, schedule: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """Run one schedule call, marked when a window records (training calls only: an
    evaluation's forward-only schedule is left as it is)."""
    global _call, _step_driver
    if _call is not None:  # a schedule inside a schedule: the outer one marks
        return schedule(*args, **kwargs)
    driver = recording_driver()
    if driver is None or kwargs.get("forward_only"):
        if driver is None:
            _step_driver = None
        return schedule(*args, **kwargs)
    _step_driver = driver
    model = kwargs.get("model")
    chunks = len(model) if isinstance(model, (list, tuple)) else 1
    call = ScheduleCall(driver, chunks)
    pp = ScheduleCall._pipelined()
    stages = int(_parallel_state().get_pipeline_model_parallel_world_size()) if pp else 1
    text = sm.name(sm.FORWARD_BACKWARD, call.stage, schedule=family, stages=stages,
                   chunks=chunks, microbatches=kwargs.get("num_microbatches"))
    _call = call
    try:
        with driver.mark(text):
            return schedule(*args, **kwargs)
    finally:
        _call = None


def mindspeed_prof_forward_step_wrapper(forward_step: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(forward_step)
    def marked_forward_step(*args: Any, **kwargs: Any) -> Any:
        call = _call
        if call is None:
            return forward_step(*args, **kwargs)
        chunk = call.chunk(kwargs)
        mb = call.next_forward(chunk)
        with call.driver.mark(sm.name(sm.FORWARD_COMPUTE, call.stage, chunk=chunk, mb=mb), True):
            result = forward_step(*args, **kwargs)
        output = result[0] if isinstance(result, tuple) else result
        call.pending[id(output)] = (chunk, mb)
        return result

    return marked_forward_step


def mindspeed_prof_backward_step_wrapper(backward_step: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(backward_step)
    def marked_backward_step(*args: Any, **kwargs: Any) -> Any:
        call = _call
        if call is None:
            return backward_step(*args, **kwargs)
        output = args[1] if len(args) > 1 else kwargs.get("output_tensor")
        chunk, mb = call.pending.pop(id(output), (None, None))
        with call.driver.mark(sm.name(sm.BACKWARD_COMPUTE, call.stage, chunk=chunk, mb=mb),
                              True):
            return backward_step(*args, **kwargs)

    return marked_backward_step


def _p2p_wrapper(method: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    timer, side = P2P_CALLS[method]

    def wrapper(p2p: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(p2p)
        def marked_p2p(*args: Any, **kwargs: Any) -> Any:
            call = _call
            if call is None or call.in_p2p:  # one mark per call, not per helper it calls
                return p2p(*args, **kwargs)
            peer = call.next_rank if side == "next" else call.prev_rank if side else None
            call.in_p2p = True
            try:
                with call.driver.mark(sm.name(timer, call.stage, peer=peer)):
                    return p2p(*args, **kwargs)
            finally:
                call.in_p2p = False

        return marked_p2p

    wrapper.__name__ = wrapper.__qualname__ = f"mindspeed_prof_{method}_wrapper"
    return wrapper


def _marked_outside_schedule(timer_of: Callable[[Any], str]) -> Callable[..., Any]:
    """A wrapper for a method that may run inside the schedule or after it (optimizer, grads,
    params): marked in the steps whose schedule call was marked, outermost call only."""
    busy: List[bool] = [False]

    def wrapper(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def marked(*args: Any, **kwargs: Any) -> Any:
            driver = _step_driver
            if driver is None or busy[0]:
                return method(*args, **kwargs)
            stage = _call.stage if _call is not None else _stage()
            busy[0] = True
            try:
                with driver.mark(sm.name(timer_of(args[0]), stage)):
                    return method(*args, **kwargs)
            finally:
                busy[0] = False

        return marked

    return wrapper


def _grads_timer(ddp: Any) -> str:
    distributed = getattr(getattr(ddp, "ddp_config", None), "use_distributed_optimizer", False)
    return sm.GRADS_REDUCE_SCATTER if distributed else sm.GRADS_ALL_REDUCE


mindspeed_prof_finish_grad_sync_wrapper = _marked_outside_schedule(_grads_timer)
mindspeed_prof_start_param_sync_wrapper = _marked_outside_schedule(lambda _: sm.PARAMS_ALL_GATHER)
mindspeed_prof_optimizer_step_wrapper = _marked_outside_schedule(lambda _: sm.OPTIMIZER)
for _name in ("finish_grad_sync", "start_param_sync", "optimizer_step"):
    _func = globals()[f"mindspeed_prof_{_name}_wrapper"]
    _func.__name__ = _func.__qualname__ = f"mindspeed_prof_{_name}_wrapper"


def shared_targets() -> List[Tuple[str, Callable[..., Any]]]:
    """Every piece the installed megatron-core has, with its wrapper."""
    targets: List[Tuple[str, Callable[..., Any]]] = [
        (FORWARD_STEP, mindspeed_prof_forward_step_wrapper),
        (BACKWARD_STEP, mindspeed_prof_backward_step_wrapper)]
    p2p = importlib.import_module(P2P)
    communicator = getattr(p2p, "P2PCommunicator", None)
    for method in P2P_CALLS:
        if communicator is not None and method in vars(communicator):
            targets.append((f"{P2P}.P2PCommunicator.{method}", _p2p_wrapper(method)))
        elif callable(getattr(p2p, method, None)):
            targets.append((f"{P2P}.{method}", _p2p_wrapper(method)))
    try:
        ddp_module, ddp_class = DDP.rsplit(".", 1)
        ddp = getattr(importlib.import_module(ddp_module), ddp_class)
    except (ImportError, AttributeError):
        ddp = None
    if ddp is not None:
        for method, wrapper in (("finish_grad_sync", mindspeed_prof_finish_grad_sync_wrapper),
                                ("start_param_sync", mindspeed_prof_start_param_sync_wrapper)):
            if method in vars(ddp):
                targets.append((f"{DDP}.{method}", wrapper))
    optimizers = importlib.import_module(OPTIMIZERS)
    for name in OPTIMIZER_CLASSES:
        cls = getattr(optimizers, name, None)
        if isinstance(cls, type) and "step" in vars(cls):
            targets.append((f"{OPTIMIZERS}.{name}.step", mindspeed_prof_optimizer_step_wrapper))
    return targets
