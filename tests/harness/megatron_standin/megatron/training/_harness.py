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
_HARNESS_DIR = pathlib.Path(__file__).resolve().parents[3]


def _load(name):
    module_name = f"_megatron_standin_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, _HARNESS_DIR / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


_versions = _load("standin_versions")
SUPPORTED_VERSIONS = _versions.SUPPORTED_VERSIONS
VERSION_STRING = os.environ.get(VERSION_ENV) or _versions.default_version()
if VERSION_STRING not in SUPPORTED_VERSIONS:
    raise ImportError(
        f"{VERSION_ENV}={VERSION_STRING} is not emulated; "
        f"use one of {', '.join(SUPPORTED_VERSIONS)}."
    )
VERSION = tuple(int(part) for part in VERSION_STRING.split("."))

cpu_shim = _load("cpu_shim")
report = _load("report").open_report(os.environ, version=VERSION_STRING)
faults = _load("faults").FaultPlan.from_env(os.environ)
faults.slow_down_export()
faults.break_torch_profiler()
faults.limit_file_size()
