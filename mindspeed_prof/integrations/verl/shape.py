"""What the integration relies on in verl's ActorRolloutRefWorker, checked when the integration is
imported, so a verl whose worker looks different fails with what is missing instead of profiling
nothing. Shapes are read from verl 0.9.1 (``verl/workers/engine_workers.py``); no verl import
here, the caller passes verl's objects in.
"""

import importlib
import inspect
from types import SimpleNamespace
from typing import Optional

TESTED_VERSIONS = ("0.9.1",)

# method -> (async?, a parameter it must take): the worker methods the integration wraps, each
# registered with verl's @register (its dispatch attributes live on the function).
WORKER_METHODS = {
    "init_model": (False, None),
    "compute_log_prob": (False, "data"),
    "update_actor": (False, "data"),
    "compute_ref_log_prob": (False, "data"),
    "update_weights": (True, "global_steps"),
    "start_profile": (False, None),
}


class UnknownVerlShape(RuntimeError):
    """verl's worker does not have the shape the integration was written against."""


# (module, name): what the integration imports from verl.
IMPORTS = {
    "MAGIC_ATTR": ("verl.single_controller.base.decorator", "MAGIC_ATTR"),
    "ActorRolloutRefWorker": ("verl.workers.engine_workers", "ActorRolloutRefWorker"),
    "BaseRollout": ("verl.workers.rollout.base", "BaseRollout"),
    "get_rollout_class": ("verl.workers.rollout.base", "get_rollout_class"),
}


# What the TaskRunner hook imports (runner.py, main_ppo.py).
RUNNER_IMPORTS = {
    "TaskRunner": ("verl.trainer.main_ppo_v0", "TaskRunner"),
    "BaseTaskRunner": ("verl.trainer.main_ppo_v0", "BaseTaskRunner"),
    "run_ppo": ("verl.trainer.main_ppo", "run_ppo"),
}


def imports(names) -> SimpleNamespace:
    """verl's objects ``names`` lists ({key: (module, name)}), plus ``version`` (imports verl);
    UnknownVerlShape naming every one that is missing."""
    import verl

    version = getattr(verl, "__version__", "?")
    found, missing = {"version": version}, []
    for key, (module, name) in names.items():
        try:
            found[key] = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            missing.append(f"{module}.{name}: {exc}")
    if missing:
        raise UnknownVerlShape(_message(version, missing))
    return SimpleNamespace(**found)


def load() -> SimpleNamespace:
    """verl's objects the worker needs, its worker's shape checked."""
    found = imports(IMPORTS)
    check(found.version, found.ActorRolloutRefWorker, found.MAGIC_ATTR, found.BaseRollout)
    return found


def check(version: str, worker_cls, magic_attr: str, base_rollout) -> None:
    """Raise UnknownVerlShape listing every difference from the known shape."""
    missing = []
    for name, (is_async, parameter) in WORKER_METHODS.items():
        method = getattr(worker_cls, name, None)
        problem = _method_problem(method, is_async, parameter, magic_attr)
        if problem:
            missing.append(f"{worker_cls.__name__}.{name}: {problem}")
    if not callable(getattr(base_rollout, "generate_sequences", None)):
        missing.append("verl.workers.rollout.base.BaseRollout.generate_sequences: not defined")
    if missing:
        raise UnknownVerlShape(_message(version, missing))


def _message(version, missing):
    return (f"mindspeed_prof's verl integration knows the ActorRolloutRefWorker of verl "
            f"{', '.join(TESTED_VERSIONS)}; verl {version}'s differs: " + "; ".join(missing) +
            f". Use verl {TESTED_VERSIONS[-1]}, or wrap your worker's methods with "
            f"mindspeed_prof.role_profiler yourself (docs/rl.md).")


def _method_problem(method, is_async: bool, parameter: Optional[str], magic_attr: str):
    if method is None or not callable(method):
        return "not defined"
    attrs = getattr(method, magic_attr, None)
    if not isinstance(attrs, dict) or "dispatch_mode" not in attrs:
        return "not a worker method registered with verl's @register (no dispatch mode)"
    if inspect.iscoroutinefunction(method) != is_async:
        return "is async" if not is_async else "is not async (a coroutine function)"
    if parameter is not None:
        try:
            params = inspect.signature(method).parameters
        except (TypeError, ValueError):
            return f"its signature cannot be read (needs a {parameter!r} parameter)"
        if parameter not in params:
            return f"takes no {parameter!r} parameter ({', '.join(params)})"
    return None


def untested_note(version: str) -> Optional[str]:
    if version in TESTED_VERSIONS:
        return None
    return (f"verl {version}: the worker has the shape of verl {', '.join(TESTED_VERSIONS)}, "
            f"which is what the integration is tested on; check the step ids in the traces")
