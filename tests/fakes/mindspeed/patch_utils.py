"""Mirror of ``mindspeed.patch_utils``: patches registered by dotted name, applied later.

A function whose ``__name__`` ends in ``wrapper``/``decorator`` is stacked (the last registered
is outermost); anything else replaces the target (once, unless forced). Applying rebinds every
module attribute of the same name that still holds the previously installed function.
``remove_patches`` restores the original and forgets every wrapper.
"""

import importlib
import sys


def _owner(name):
    """The module, or the class of a module for ``module.Class`` (MindSpeed patches methods)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        parent, attr = name.rsplit(".", 1)
        return getattr(importlib.import_module(parent), attr)


class Patch:
    def __init__(self, target):
        self.module_name, self.attr = target.rsplit(".", 1)
        self.original = None
        self.replacement = None
        self.wrappers = []
        self.final = None
        self.is_applied = False

    def add(self, func, force=False):
        if func.__name__.endswith(("wrapper", "decorator")):
            if func not in self.wrappers:
                self.wrappers.append(func)
        else:
            if self.replacement is not None and not force:
                raise RuntimeError(f"the patch of {self.attr} exist !")
            self.replacement = func
        self.is_applied = False

    def apply(self):
        if self.is_applied:
            return
        module = _owner(self.module_name)
        current = getattr(module, self.attr)
        if self.original is None:
            self.original = current
        final = self.replacement or self.original
        for wrapper in self.wrappers:
            final = wrapper(final)
        setattr(module, self.attr, final)
        for other in list(sys.modules.values()):
            if other is not None and getattr(other, self.attr, None) is current:
                setattr(other, self.attr, final)
        self.final, self.is_applied = final, True

    def remove(self):
        for name, other in list(sys.modules.items()):
            if "mindspeed" in name or other is None:
                continue
            if getattr(other, self.attr, None) is self.final:
                setattr(other, self.attr, self.original)
        owner = _owner(self.module_name) if self.final is not None else None
        if isinstance(owner, type) and getattr(owner, self.attr, None) is self.final:
            setattr(owner, self.attr, self.original)
        self.replacement, self.final, self.is_applied = None, None, False
        self.wrappers.clear()


class MindSpeedPatchesManager:
    patches_info = {}

    @staticmethod
    def register_patch(target, new_func=None, force_patch=False, create_dummy=False):
        patch = MindSpeedPatchesManager.patches_info.setdefault(target, Patch(target))
        patch.add(new_func, force_patch)

    @staticmethod
    def remove_wrappers(target, wrapper_names, remove_check=True):
        patch = MindSpeedPatchesManager.patches_info[target]
        names = [wrapper_names] if isinstance(wrapper_names, str) else wrapper_names
        patch.wrappers[:] = [w for w in patch.wrappers if w.__name__ not in names]

    @staticmethod
    def remove_patches():
        for patch in MindSpeedPatchesManager.patches_info.values():
            patch.remove()

    @staticmethod
    def apply_patches():
        for patch in MindSpeedPatchesManager.patches_info.values():
            patch.apply()
