"""verl/single_controller/ray/base.py's ``_bind_workers_method_to_parent``: how the colocated
``WorkerDict`` re-exposes each registered method of a worker class as ``{key}_{name}``, copying
the dispatch attributes and keeping async methods async (without Ray)."""

import inspect

from ..base.decorator import MAGIC_ATTR


def bind_workers_method_to_parent(cls, key, user_defined_cls):
    for method_name in dir(user_defined_cls):
        method = getattr(user_defined_cls, method_name, None)
        if not callable(method) or not hasattr(method, MAGIC_ATTR):
            continue

        def generate_function(name, key=key, is_async=inspect.iscoroutinefunction(method)):
            def func(self, *args, **kwargs):
                return getattr(self.worker_dict[key], name)(*args, **kwargs)

            async def async_func(self, *args, **kwargs):
                return await getattr(self.worker_dict[key], name)(*args, **kwargs)

            return async_func if is_async else func

        func = generate_function(method_name)
        setattr(func, MAGIC_ATTR, getattr(method, MAGIC_ATTR))
        setattr(cls, f"{key}_{method_name}", func)
