"""Harness plumbing of the stand-in; Megatron-LM has no such module.

It picks the emulated Megatron-LM version and loads the runtime helpers that live beside the
stand-in in ``tests/harness`` by path, so the only thing a run needs on ``PYTHONPATH`` is the
stand-in's own folder.
"""

import importlib.util
import os
import pathlib
import sys

VERSION_ENV = "MEGATRON_STANDIN_VERSION"
SUPPORTED_VERSIONS = ("0.12.3", "0.13.1", "0.14.0", "0.15.3", "0.16.1", "0.17.1", "0.18.2",
                      "0.19.0")


def _release(text):
    return tuple(int(part) for part in text.split(".")[:2])


def default_version():
    """The newest emulated release not newer than the installed megatron-core (0.16.1 -> 0.16.1,
    0.19.2 -> 0.19.0): by default the training side matches the core it runs on."""
    try:
        from importlib.metadata import version
        core = _release(version("megatron-core"))
    except Exception:  # noqa: BLE001  (no metadata: a source checkout on the path)
        return "0.16.1"
    fitting = [v for v in SUPPORTED_VERSIONS if _release(v) <= core]
    return fitting[-1] if fitting else SUPPORTED_VERSIONS[0]


VERSION_STRING = os.environ.get(VERSION_ENV) or default_version()
if VERSION_STRING not in SUPPORTED_VERSIONS:
    raise ImportError(
        f"{VERSION_ENV}={VERSION_STRING} is not emulated; "
        f"use one of {', '.join(SUPPORTED_VERSIONS)}."
    )
VERSION = tuple(int(part) for part in VERSION_STRING.split("."))

_HARNESS_DIR = pathlib.Path(__file__).resolve().parents[3]


def _load(name):
    module_name = f"_megatron_standin_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, _HARNESS_DIR / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


cpu_shim = _load("cpu_shim")
report = _load("report").open_report(os.environ, version=VERSION_STRING)
faults = _load("faults").FaultPlan.from_env(os.environ)
faults.slow_down_export()
faults.break_torch_profiler()
faults.limit_file_size()
