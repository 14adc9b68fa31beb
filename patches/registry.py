"""Register patches by dotted target, apply them, undo them.

Applying wraps the target's current object and then rebinds every module attribute that still
points at the replaced object: MindSpeed-LLM and Megatron's tasks do
``from megatron.training.training import train_step`` and would otherwise keep calling the
unwrapped function. Wrappers stack with anyone else's (each wraps what it finds). When MindSpeed's
patch manager is active in the process, patches go through it instead, so its own re-application
keeps ours in the chain. ``ensure()`` re-applies a patch whose wrapper someone removed (MindSpeed-
LLM's adaptor calls ``remove_patches()``); ``follow_mindspeed()`` runs it after every apply of
MindSpeed's manager, so a remove/re-apply cycle (``repatch()``) cannot drop ours; ``undo()`` puts the
originals back.
"""

import functools
import importlib
import sys

MARK = "_mindspeed_prof_patch"


def _resolve(target):
    """(owner, attribute): the owner is the module, or a class of it for ``module.Class.method``
    (the inference targets are methods, as in MindSpeed's patch manager)."""
    module_name, attr = target.rsplit(".", 1)
    try:
        return importlib.import_module(module_name), attr
    except ImportError:
        if "." not in module_name:
            raise
        parent, class_name = module_name.rsplit(".", 1)
        owner = getattr(importlib.import_module(parent), class_name, None)
        if not isinstance(owner, type):
            raise
        return owner, attr


def _chain(func):
    """``func`` and everything it wraps (functools.wraps sets __wrapped__)."""
    seen = set()
    while func is not None and id(func) not in seen:
        seen.add(id(func))
        yield func
        func = getattr(func, "__wrapped__", None)


def markers(func):
    """Our patch markers down ``func``'s wrapper chain, outermost first (``target:decorator``)."""
    return [getattr(f, MARK) for f in _chain(func) if getattr(f, MARK, None)]


def in_chain(func, marker):
    return marker in markers(func)


def _wears(func, decorator):
    """``func`` already carries ``decorator``'s wrapper, applied for another target: MindSpeed-LLM's
    ``train`` replaces Megatron's, so wrapping Megatron's name rebinds MindSpeed-LLM's too."""
    return any(marker.endswith(f":{decorator.__name__}") for marker in markers(func))


def _rebind(attr, old, new, skip_module=None):
    """Point every module attribute named ``attr`` that holds ``old`` at ``new``.

    Only the same name, as MindSpeed does: a host that kept the original under another name
    (``_orig_train_step``) to call it from its own replacement must keep it, or it would recurse.
    """
    places = []
    for name, module in list(sys.modules.items()):
        if module is None or module is skip_module or name.startswith("mindspeed_prof"):
            continue
        try:
            if getattr(module, attr, None) is old:
                setattr(module, attr, new)
                places.append((module, attr))
        except Exception:  # noqa: BLE001 - lazy modules may raise on attribute access
            continue
    return places


class Patch:
    def __init__(self, target, decorator, through_mindspeed=True):
        if not decorator.__name__.endswith("_wrapper"):
            raise ValueError(f"{decorator.__name__}: patch decorators end in '_wrapper' so that "
                             f"MindSpeed's patch manager stacks them instead of replacing")
        self.target = target
        self.decorator = decorator
        self.marker = f"{target}:{decorator.__name__}"
        self.original = None
        self.installed = None
        self.places = []
        self.via_mindspeed = False
        self.through_mindspeed = through_mindspeed

    def wrap(self, func):
        wrapped = self.decorator(func)
        setattr(wrapped, MARK, self.marker)
        return wrapped


def _mindspeed_manager():
    """MindSpeed's patch manager when MindSpeed is active in this process, else None."""
    module = sys.modules.get("mindspeed.patch_utils")
    return getattr(module, "MindSpeedPatchesManager", None) if module else None


class PatchRegistry:
    def __init__(self):
        self.patches = {}
        self._busy = False      # applying: MindSpeed's apply called from here must not re-enter
        self._followed = None   # (MindSpeed's manager class, its own apply_patches)

    def register(self, target, decorator, through_mindspeed=True):
        """``through_mindspeed=False`` patches beside MindSpeed's manager even when it is active:
        for patches applied from an import hook, which may fire inside MindSpeed's own
        ``apply_patches`` loop (registering there would change the dict it iterates)."""
        patch = self.patches.get(target)
        if patch is None or patch.decorator is not decorator:
            self.patches[target] = Patch(target, decorator, through_mindspeed)
        return self.patches[target]

    def apply(self, target=None):
        """Apply one registered target (or all) whose module is imported; idempotent."""
        for patch in self._selected(target):
            self._apply(patch)

    def ensure(self, target=None):
        """Re-apply patches that are no longer in their target's call chain."""
        busy, self._busy = self._busy, True
        try:
            self._ensure(target)
        finally:
            self._busy = busy

    def _ensure(self, target):
        for patch in self._selected(target):
            try:
                module, attr = _resolve(patch.target)
            except ImportError:
                continue  # the host lacks this module (e.g. no MindSpeed-LLM training)
            if patch.installed is not None and not in_chain(getattr(module, attr, None),
                                                            patch.marker):
                patch.installed = None
            self._apply(patch)

    def _selected(self, target):
        if target is None:
            return list(self.patches.values())
        return [self.patches[target]] if target in self.patches else []

    def _apply(self, patch):
        module, attr = _resolve(patch.target)
        current = getattr(module, attr)
        if in_chain(current, patch.marker) or _wears(current, patch.decorator):
            return
        manager = _mindspeed_manager() if patch.through_mindspeed else None
        if manager is not None:
            if getattr(patch, "mindspeed_wrapper", None) is None:
                patch.mindspeed_wrapper = _named_wrapper(patch)
            manager.register_patch(patch.target, patch.mindspeed_wrapper)
            busy, self._busy = self._busy, True
            try:
                manager.apply_patches()
            finally:
                self._busy = busy
            installed = getattr(module, attr)
            if in_chain(installed, patch.marker):
                patch.via_mindspeed = True
                patch.original = current
                patch.installed = installed
                return
        patch.original = current
        patch.installed = patch.wrap(current)
        setattr(module, attr, patch.installed)
        patch.places = [(module, attr)]
        if not isinstance(module, type):  # a method is reached through its class, never copied
            patch.places += _rebind(attr, current, patch.installed, skip_module=module)

    def follow_mindspeed(self, patch_utils):
        """Check our patches after every ``MindSpeedPatchesManager.apply_patches()``.

        MindSpeed's ``remove_patches()`` (MindSpeed-LLM's adaptor, ``megatron_adaptor.repatch``)
        forgets every wrapper registered with it and the re-apply that follows brings back only
        what features register: without this our train/train_step wrappers would be gone.
        """
        manager = getattr(patch_utils, "MindSpeedPatchesManager", None)
        if manager is None or self._followed is not None:
            return
        own_apply = manager.apply_patches

        @functools.wraps(own_apply)
        def apply_patches_then_ours(*args, **kwargs):
            result = own_apply(*args, **kwargs)
            if not self._busy:
                self.ensure()
            return result

        manager.apply_patches = staticmethod(apply_patches_then_ours)
        self._followed = (manager, own_apply)

    def _unfollow(self):
        if self._followed is not None:
            manager, own_apply = self._followed
            manager.apply_patches = staticmethod(own_apply)
            self._followed = None

    def undo(self):
        """Restore every patched attribute; a wrapper someone stacked on stays, turned inert."""
        self._unfollow()
        for patch in reversed(list(self.patches.values())):
            if patch.installed is None:
                continue
            if patch.via_mindspeed:
                _undo_in_mindspeed(patch)
            for module, attr in patch.places:
                if getattr(module, attr, None) is patch.installed:
                    setattr(module, attr, patch.original)
            patch.installed = None
            patch.places = []
        self.patches.clear()


def _named_wrapper(patch):
    def wrapper(func):
        return patch.wrap(func)

    # MindSpeed stacks a function whose name ends in "wrapper"; it must not look like MindSpeed's
    # own wrappers either, since MindSpeed removes wrappers by name.
    wrapper.__name__ = patch.decorator.__name__
    wrapper.__qualname__ = patch.decorator.__qualname__
    return wrapper


def _undo_in_mindspeed(patch):
    manager = _mindspeed_manager()
    info = getattr(manager, "patches_info", {}).get(patch.target) if manager else None
    if info is None:
        return
    wrappers = getattr(info, "wrappers", [])
    if getattr(patch, "mindspeed_wrapper", None) in wrappers:
        wrappers.remove(patch.mindspeed_wrapper)
        info.is_applied = False
        manager.apply_patches()
