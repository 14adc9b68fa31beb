"""Inert ``torch_npu``, ``torchair`` and ``acl`` for running MindSpeed and MindSpeed-LLM on CPU.

Both import these at module level (``from torch_npu.contrib import transfer_to_npu``, ``import
torchair``...). A meta-path finder serves every module under those names; an attribute nobody
defined is an :class:`Inert` class (callable, subclassable, its attributes inert in turn), so
feature code that merely mentions an NPU API imports and does nothing. What must answer truly:

* ``torch_npu.npu.is_available()`` is False: MindSpeed picks CPU paths;
* ``import torch_npu`` binds ``torch_npu.npu`` (also as ``torch.npu``) and ``torch_npu.profiler``
  as the wheel does;
* ``torch_npu.profiler.profile`` is a real ``torch.profiler.profile`` that prints
  :data:`ANNOUNCE` when it starts: a host profiler (MindSpeed-LLM's loop profiler) starting beside
  ours is visible in the output, and fails as it would on hardware (one profiler per thread).
"""

import importlib.abc
import importlib.machinery
import os
import sys
import types

ROOTS = ("torch_npu", "torchair", "acl")
STUB_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "not_installed")
ANNOUNCE = "STUB torch_npu.profiler.profile STARTED"


class _InertMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _inert(f"{cls.__name__}.{name}")

    def __bool__(cls):
        return False

    def __iter__(cls):  # e.g. torch_npu.unsupported_dtype: an empty collection
        return iter(())

    def __len__(cls):
        return 0


class Inert(metaclass=_InertMeta):
    """Stands for any NPU object: construct it, call it, read, iterate or subclass it; nothing
    happens (falsy, empty)."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return Inert()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Inert()

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _inert(name):
    return _InertMeta(name, (Inert,), {})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _inert(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


def _fill_torch_npu(module):
    module.__version__ = "0.0.0+cpustub"
    module.npu = importlib.import_module("torch_npu.npu")
    module.profiler = importlib.import_module("torch_npu.profiler")
    import torch

    torch.npu = module.npu  # the wheel registers its device module on torch


def _fill_npu(module):
    module.is_available = lambda: False
    module.device_count = lambda: 0
    module.current_device = lambda: 0
    module.set_device = lambda *a, **k: None
    module.synchronize = lambda *a, **k: None


def _fill_profiler(module):
    import torch

    class profile(torch.profiler.profile):  # noqa: N801 - torch_npu's name
        def __init__(self, *args, activities=None, experimental_config=None, **kwargs):
            kwargs.pop("with_modules", None)
            super().__init__(*args, activities=[torch.profiler.ProfilerActivity.CPU], **kwargs)

        def start(self):
            print(ANNOUNCE, file=sys.stderr, flush=True)
            return super().start()

    class ProfilerActivity:
        CPU = NPU = torch.profiler.ProfilerActivity.CPU

    module.profile = profile
    module.ProfilerActivity = ProfilerActivity
    module.schedule = torch.profiler.schedule
    module.tensorboard_trace_handler = torch.profiler.tensorboard_trace_handler


SPECIAL = {"torch_npu": _fill_torch_npu, "torch_npu.npu": _fill_npu,
           "torch_npu.profiler": _fill_profiler}


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []  # every stub is a package, so any submodule imports
        # MindSpeed's op builder locates the wheel's files (it then builds nothing on CPU).
        module.__file__ = os.path.join(STUB_ROOT, *spec.name.split("."), "__init__.py")
        return module

    def exec_module(self, module):
        fill = SPECIAL.get(module.__name__)
        if fill is not None:
            fill(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] not in ROOTS:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)


def install():
    """Serve the stubs from now on (before anything imports MindSpeed)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
