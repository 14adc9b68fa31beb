"""Give one implementation the keyword surface of a particular wheel.

profile/_KinetoProfile gained keyword-only parameters over time; rather than keep
one copy of a long __init__ per wheel, the newest implementation is published with
the older parameters hidden, and a hidden keyword fails like Python itself would.
"""

import functools
import inspect


def without_keywords(func, hidden: set):
    if not hidden:
        return func
    signature = inspect.signature(func)
    visible = [param for name, param in signature.parameters.items() if name not in hidden]

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        for name in kwargs:
            if name in hidden:
                raise TypeError(f"{func.__qualname__}() got an unexpected keyword argument '{name}'")
        return func(*args, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=visible)
    return wrapper
