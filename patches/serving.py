"""What the dynamic engine's patch, its HTTP relay and the servers' routes share: the engine
being counted, its step numbering, the server's one-window state and rank 0's broadcast.

``dynamic_inference.py`` (the engine's steps), ``dynamic_control.py`` (how a start reaches each
engine rank) and ``profile_routes.py`` (the routes) all read these; kept in this leaf, which
imports none of them, so the three import one way (routes -> control -> here, engine -> here).
"""

import weakref
from typing import Any, Optional

from mindspeed_prof.control import http_control

# Rank 0 of a server: the routes' one-window state (profile_routes makes it before the fork).
control: Optional[http_control.WindowControl] = None
engine_ref: Optional["weakref.ref[Any]"] = None  # the engine the driver counts the steps of
lost = 0  # 0.18's dummy forward resets context.step_count to 0: the steps it took before


def server_control() -> http_control.WindowControl:
    """The server's one-window state, made once by the process that serves (before it forks
    front ends, which then share it)."""
    global control
    if control is None:
        control = http_control.WindowControl()
    return control


def counted_engine() -> Any:
    """The engine whose steps the driver counts (None: no profiled engine was built)."""
    return engine_ref() if engine_ref is not None else None


def next_step(engine: Any) -> int:
    """The number of the engine's next step: ``context.step_count + 1``, plus what 0.18.2's
    dummy forward took away (its ``context.reset()`` zeroes the count; 0.19 preserves it)."""
    return int(engine.context.step_count) + 1 + lost


def from_rank0(value: Any, rank: int, world: int) -> Any:
    """Rank 0's ``value`` on every rank, in one broadcast (the poll's JSON exchange: nothing a
    rank receives is executed); ``value`` itself where there is one rank or no process group."""
    import torch.distributed as dist

    from mindspeed_prof.control import exchange
    from mindspeed_prof.control.trigger import _collective_device

    if world <= 1 or not (dist.is_available() and dist.is_initialized()):
        return value
    return exchange.broadcast(value, rank=rank, device=_collective_device(dist))
