"""The patch registry on small host modules shaped like Megatron's (no Megatron needed)."""

import functools
import os
import sys
import types

import pytest

from mindspeed_prof.patches.registry import PatchRegistry, in_chain

FAKES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fakes")


def host_step(x):
    return ("step", x)


@pytest.fixture
def host(monkeypatch):
    """``host.training.train_step`` plus a module that imported it by name (like MindSpeed-LLM)."""
    training = types.ModuleType("host.training")
    training.train_step = host_step
    llm = types.ModuleType("host.llm_training")
    llm.train_step = training.train_step
    llm.step_alias = training.train_step
    for name, module in (("host", types.ModuleType("host")), ("host.training", training),
                         ("host.llm_training", llm)):
        monkeypatch.setitem(sys.modules, name, module)
    return training, llm


def counting_wrapper(calls):
    def probe_wrapper(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            calls.append(args)
            return func(*args, **kwargs)
        return wrapped
    return probe_wrapper


def test_apply_rebinds_references_imported_by_name(host):
    training, llm = host
    calls = []
    registry = PatchRegistry()
    registry.register("host.training.train_step", counting_wrapper(calls))
    registry.apply()
    assert llm.train_step("a") == ("step", "a")
    assert training.train_step("c") == ("step", "c")
    assert calls == [("a",), ("c",)]


def test_references_kept_under_another_name_are_left_alone(host):
    _, llm = host
    registry = PatchRegistry()
    registry.register("host.training.train_step", counting_wrapper([]))
    registry.apply()
    assert llm.step_alias is host_step  # a host's saved original must stay the original


def test_apply_twice_wraps_once(host):
    training, _ = host
    calls = []
    registry = PatchRegistry()
    registry.register("host.training.train_step", counting_wrapper(calls))
    registry.apply()
    registry.apply()
    registry.ensure()
    training.train_step(1)
    assert calls == [(1,)]


def test_undo_restores_the_originals_exactly(host):
    training, llm = host
    registry = PatchRegistry()
    registry.register("host.training.train_step", counting_wrapper([]))
    registry.apply()
    registry.undo()
    assert training.train_step is host_step and llm.train_step is host_step


def test_someone_elses_wrapper_on_top_is_kept_by_undo(host):
    training, _ = host
    registry = PatchRegistry()
    registry.register("host.training.train_step", counting_wrapper([]))
    registry.apply()
    theirs = functools.wraps(training.train_step)(lambda *a: ("theirs",) + training_step(*a))
    training_step = training.train_step
    training.train_step = theirs
    registry.undo()
    assert training.train_step is theirs


def test_ensure_reapplies_after_the_host_reinstalled_the_original(host):
    training, _ = host
    calls = []
    registry = PatchRegistry()
    registry.register("host.training.train_step", counting_wrapper(calls))
    registry.apply()
    training.train_step = host_step  # e.g. MindSpeed-LLM's remove_patches()
    registry.ensure()
    training.train_step(7)
    assert calls == [(7,)]


def test_decorators_must_be_named_as_wrappers():
    def hook(func):
        return func
    with pytest.raises(ValueError, match="end in '_wrapper'"):
        PatchRegistry().register("host.training.train_step", hook)


def test_a_function_already_wearing_our_wrapper_under_another_name_is_not_wrapped_again(host):
    # MindSpeed-LLM's train replaces Megatron's: wrapping Megatron's name rebinds MindSpeed-LLM's.
    training, llm = host
    calls = []
    wrapper = counting_wrapper(calls)
    registry = PatchRegistry()
    registry.register("host.training.train_step", wrapper)
    registry.register("host.llm_training.train_step", wrapper)
    registry.apply()
    llm.train_step(2)
    assert calls == [(2,)]


@pytest.fixture
def mindspeed(monkeypatch):
    """MindSpeed's patch manager (a mirror of its documented semantics) active in the process."""
    monkeypatch.syspath_prepend(FAKES)
    for name in [n for n in sys.modules if n.split(".")[0] in ("mindspeed", "mindspeed_llm")]:
        monkeypatch.delitem(sys.modules, name)
    import mindspeed.patch_utils as patch_utils
    patch_utils.MindSpeedPatchesManager.patches_info.clear()
    yield patch_utils.MindSpeedPatchesManager
    patch_utils.MindSpeedPatchesManager.patches_info.clear()
    for name in [n for n in sys.modules if n.split(".")[0] in ("mindspeed", "mindspeed_llm")]:
        sys.modules.pop(name, None)


def test_with_mindspeed_active_patches_stack_through_its_manager(host, mindspeed):
    training, llm = host
    order = []

    def tflops_wrapper(func):
        @functools.wraps(func)
        def wrapped(*args):
            order.append("mindspeed")
            return func(*args)
        return wrapped

    mindspeed.register_patch("host.training.train_step", tflops_wrapper)
    mindspeed.apply_patches()

    def ours_wrapper(func):
        @functools.wraps(func)
        def wrapped(*args):
            order.append("ours")
            return func(*args)
        return wrapped

    registry = PatchRegistry()
    registry.register("host.training.train_step", ours_wrapper)
    registry.apply()
    assert llm.train_step(1) == ("step", 1)
    assert order == ["ours", "mindspeed"]
    assert registry.patches["host.training.train_step"].via_mindspeed


def test_mindspeed_remove_patches_then_ensure_puts_ours_back(host, mindspeed):
    training, _ = host
    calls = []
    registry = PatchRegistry()
    registry.register("host.training.train_step", counting_wrapper(calls))
    registry.apply()
    mindspeed.remove_patches()  # what MindSpeed-LLM's adaptor does first
    assert training.train_step is host_step
    registry.ensure()
    training.train_step(3)
    assert calls == [(3,)]
    assert in_chain(training.train_step, registry.patches["host.training.train_step"].marker)


def test_following_mindspeed_puts_ours_back_after_remove_patches_and_reapply(host, mindspeed):
    # MindSpeed's repatch(): remove_patches() forgets every wrapper, the re-apply brings back only
    # what features register; nobody calls ensure() in between.
    import mindspeed.patch_utils as patch_utils
    training, _ = host
    calls = []
    registry = PatchRegistry()
    registry.follow_mindspeed(patch_utils)
    registry.register("host.training.train_step", counting_wrapper(calls))
    registry.apply()
    mindspeed.remove_patches()
    mindspeed.apply_patches()
    training.train_step(4)
    assert calls == [(4,)]
    registry.undo()


def test_undo_stops_following_mindspeed(host, mindspeed):
    import mindspeed.patch_utils as patch_utils
    training, _ = host
    own_apply = mindspeed.apply_patches
    registry = PatchRegistry()
    registry.follow_mindspeed(patch_utils)
    registry.register("host.training.train_step", counting_wrapper([]))
    registry.apply()
    registry.undo()
    assert mindspeed.apply_patches is own_apply
    mindspeed.apply_patches()
    assert training.train_step is host_step


def test_undo_through_mindspeed_removes_only_our_wrapper(host, mindspeed):
    training, _ = host
    mine, theirs = [], []

    def other_wrapper(func):
        @functools.wraps(func)
        def wrapped(*args):
            theirs.append(args)
            return func(*args)
        return wrapped

    mindspeed.register_patch("host.training.train_step", other_wrapper)
    registry = PatchRegistry()
    registry.register("host.training.train_step", counting_wrapper(mine))
    registry.apply()
    registry.undo()
    training.train_step(5)
    assert mine == [] and theirs == [(5,)]
