"""verl/single_controller/base/decorator.py: ``@register`` stores the dispatch attributes on the
wrapper under MAGIC_ATTR (worker groups find worker methods by it); async methods stay async."""

import functools
import inspect
from enum import Enum

MAGIC_ATTR = "attrs_3141562937"


class Dispatch(Enum):
    RANK_ZERO = 0
    ONE_TO_ALL = 1
    ALL_TO_ALL = 2
    DP_COMPUTE = 3
    DIRECT_ROLLOUT_METHOD = 4


class Execute(Enum):
    ALL = 0
    RANK_ZERO = 1


def make_nd_compute_dataproto_dispatch_fn(mesh_name):
    return {"dispatch_fn": ("nd_dispatch", mesh_name), "collect_fn": ("nd_collect", mesh_name)}


def register(dispatch_mode=Dispatch.ALL_TO_ALL, execute_mode=Execute.ALL, blocking=True,
             materialize_futures=True):
    def decorator(func):
        @functools.wraps(func)
        def inner(*args, **kwargs):
            return func(*args, **kwargs)

        @functools.wraps(func)
        async def async_inner(*args, **kwargs):
            return await func(*args, **kwargs)

        wrapper = async_inner if inspect.iscoroutinefunction(func) else inner
        setattr(wrapper, MAGIC_ATTR, {"dispatch_mode": dispatch_mode,
                                      "execute_mode": execute_mode, "blocking": blocking})
        return wrapper

    return decorator
