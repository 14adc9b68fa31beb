"""Print, as JSON, the shapes of whichever ``verl`` is importable that the verl integration and
its imitation rely on: ``python -m harness.verl.shape_dump`` (real verl) or with
tests/fakes/verl_imitation first on PYTHONPATH (the imitation). tests/e2e/test_real_verl.py
compares the two.
"""

import importlib
import inspect
import json
import sys


def _dispatch(attrs):
    mode = attrs["dispatch_mode"]
    # nd-compute dispatch modes are {dispatch_fn, collect_fn} mappings of functions
    return sorted(mode) if isinstance(mode, dict) else getattr(mode, "name", str(mode))


def _method(cls, name, magic):
    method = getattr(cls, name, None)
    if method is None:
        return None
    attrs = getattr(method, magic, None)
    return {"async": inspect.iscoroutinefunction(method),
            "parameters": list(inspect.signature(method).parameters),
            "dispatch": _dispatch(attrs) if attrs else None,
            "blocking": attrs.get("blocking") if attrs else None}


def main():
    decorator = importlib.import_module("verl.single_controller.base.decorator")
    workers = importlib.import_module("verl.workers.engine_workers")
    rollout = importlib.import_module("verl.workers.rollout.base")
    profiler = importlib.import_module("verl.utils.profiler")
    magic = decorator.MAGIC_ATTR
    worker = workers.ActorRolloutRefWorker
    names = ("init_model", "compute_log_prob", "update_actor", "compute_ref_log_prob",
             "update_weights", "start_profile", "stop_profile")
    registry = getattr(rollout, "_ROLLOUT_REGISTRY", {})
    shape = {
        "magic_attr": magic,
        "worker_init": list(inspect.signature(worker.__init__).parameters),
        "worker_methods": {name: _method(worker, name, magic) for name in names},
        "extension_methods": {name: _method(profiler.DistProfilerExtension, name, magic)
                              for name in ("start_profile", "stop_profile")},
        "base_rollout": sorted(n for n in ("resume", "update_weights", "release",
                                           "generate_sequences") if hasattr(rollout.BaseRollout, n)),
        "server_rollouts": sorted(name for name, _ in registry if name in ("vllm", "sglang",
                                                                            "trtllm")),
        "get_rollout_class": list(inspect.signature(rollout.get_rollout_class).parameters),
    }
    json.dump(shape, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
