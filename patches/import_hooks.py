"""Run a callback right after a module finishes importing (or now, if it already has).

The patches must land after MindSpeed/MindSpeed-LLM have patched Megatron (their adaptors are
imported by the training script), yet before training starts; hooking the import of the modules
we patch gives exactly that moment without importing Megatron ourselves.
"""

import importlib.abc
import sys
import threading

_callbacks: dict = {}  # module name -> callbacks to run once it is imported
_lock = threading.RLock()


class _Loader(importlib.abc.Loader):
    def __init__(self, wrapped, name):
        self._wrapped = wrapped
        self._name = name

    def create_module(self, spec):
        return self._wrapped.create_module(spec)

    def exec_module(self, module):
        self._wrapped.exec_module(module)
        _fire(self._name, module)

    def __getattr__(self, attr):
        return getattr(self._wrapped, attr)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _callbacks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, fullname)
                return spec
        return None


_finder = _Finder()


def _fire(name, module):
    with _lock:
        pending = _callbacks.pop(name, [])
    for callback in pending:
        callback(module)


def when_imported(name, callback):
    """Call ``callback(module)`` once ``name`` is imported; immediately if it already is."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    with _lock:
        _callbacks.setdefault(name, []).append(callback)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)


def forget_all():
    """Drop pending callbacks and the finder (undo)."""
    with _lock:
        _callbacks.clear()
        if _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
