"""Switching the integration on: decided from the command line, applied as modules import.

Nothing is patched unless the command line carries a ``--profile*`` flag. Then the argument
patches land when ``megatron.training.arguments`` is imported, and the loop patches when Megatron's
args are validated with profiling on. If ``--profile`` was asked for but no patched ``train()``
ever ran, the process says so at exit instead of silently producing nothing.
"""

import atexit
import multiprocessing
import os
import sys

from mindspeed_prof import log
from mindspeed_prof.arguments import profile_tokens_present
from mindspeed_prof.patches import import_hooks, sigterm
from mindspeed_prof.patches.megatron_args import (PARSE_ARGS, VALIDATE_ARGS,
                                                  mindspeed_prof_parse_args_wrapper,
                                                  mindspeed_prof_validate_args_wrapper)
from mindspeed_prof.patches.state import registry, state

# Host modules after whose import our patches must be (re)checked: MindSpeed's and
# MindSpeed-LLM's adaptors patch Megatron, and MindSpeed-LLM's removes every patch first.
# (``mindspeed_llm.megatron_adaptor`` is only a name its package binds, never a module: the
# adaptor is tasks.megatron_adaptor_v2 from 2.2.0 on, tasks.megatron_adaptor before.)
ADAPTORS = ("mindspeed.megatron_adaptor", "mindspeed_llm.tasks.megatron_adaptor_v2",
            "mindspeed_llm.tasks.megatron_adaptor", "mindspeed_llm.training.training")
# Modules that set MindSpeed's feature list: MindSpeed's own, then MindSpeed-LLM's, which
# replaces the whole list (set_features_list) before any flag is registered.
FEATURE_LISTS = ("mindspeed.features_manager", "mindspeed_llm.features_manager")


def activate(argv=None, by="launcher"):
    """Arm the patches if ``argv`` (default: this process's arguments) asks for profiling."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if state.activated_by is not None:
        if state.activated_by == "autoload" and by != "autoload":
            # The launcher or `import mindspeed_prof.auto` says this process means to train,
            # even where the autoload hook armed the patches first: the exit check must know.
            state.activated_by = by
        return True
    if not profile_tokens_present(argv):
        return False
    state.activated_by, state.argv = by, argv
    import_hooks.when_imported("megatron.training.arguments", _patch_arguments)
    for adaptor in ADAPTORS:
        import_hooks.when_imported(adaptor, _recheck)
    import_hooks.when_imported("mindspeed.patch_utils", registry.follow_mindspeed)
    for features in FEATURE_LISTS:
        import_hooks.when_imported(features, _register_feature)
    _hook_engines()
    atexit.register(_warn_if_not_connected)
    return True


def _hook_engines():
    """An inference engine a plain megatron-core script builds (no ``initialize_megatron``) is
    hooked when its module is imported; its config then comes from this command line, the
    environment and the YAML file (``engine_config``)."""
    from mindspeed_prof.patches import hooks

    hooks.install(hooks.ENGINE_HOOKS)


def _patch_arguments(module):
    # Beside MindSpeed's manager: this runs from an import hook, possibly inside its apply loop.
    # MindSpeed then takes our wrapped function as the original and wraps it in turn.
    registry.register(PARSE_ARGS, mindspeed_prof_parse_args_wrapper, through_mindspeed=False)
    registry.register(VALIDATE_ARGS, mindspeed_prof_validate_args_wrapper, through_mindspeed=False)
    registry.ensure()


def _recheck(module):
    if "megatron.training.arguments" in sys.modules:
        registry.ensure()


def _register_feature(module):
    from mindspeed_prof.patches.mindspeed_feature import register_with_features_manager
    register_with_features_manager(module)


def _warn_if_not_connected():
    wanted = state.config.profile if state.config is not None else "--profile" in (state.argv or [])
    # The autoload hook sees every Python process whose command line mentions --profile; only a
    # process that imported Megatron was meant to train.
    training = state.activated_by != "autoload" or any(
        name in sys.modules for name in ("megatron.training", "megatron.core"))
    # A process dying of an exception before training says so itself (sys.last_value is set).
    crashed = getattr(sys, "last_value", None) is not None
    # A multiprocessing child (the dynamic server's coordinator, spawned, re-imports the script)
    # computes nothing: it was never meant to be profiled.
    helper = multiprocessing.parent_process() is not None
    said = state.usage_error or state.left_to_host is not None  # already explained at start-up
    if wanted and training and not crashed and not helper and not state.train_hooked \
            and not said:
        log.error(_not_connected_words())


# Loops of other frameworks a script may run instead of Megatron's: (module, name).
_OTHER_LOOPS = (("mindspeed_llm.fsdp2", "MindSpeed-LLM's FSDP2 trainer"),
                ("torch.distributed.fsdp", "torch FSDP"),
                ("torch.distributed._composable.fsdp", "torch FSDP2"),
                ("deepspeed", "DeepSpeed"), ("transformers.trainer", "Hugging Face's Trainer"),
                ("accelerate", "Accelerate"), ("lightning", "Lightning"))


def _not_connected_words():
    """The exit ERROR: what ran instead of a hooked loop, and the fix that fits how we came in
    (under the launcher the chain is there: telling the user to use it would be wrong)."""
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "the script"
    if "megatron.training.training" in sys.modules:
        what = "it imported megatron.training but never called its train()"
    else:
        what = "it never imported megatron.training"
    others = list(dict.fromkeys(name for module, name in _OTHER_LOOPS if module in sys.modules))
    if others:
        what += f"; it ran {' and '.join(others)} instead"
    if state.activated_by == "launcher":
        fix = "to profile that loop, call mindspeed_prof.profile() around it"
    else:
        fix = ("run the script with `python -m mindspeed_prof.launch` (or torchrun ... -m "
               "mindspeed_prof.launch) so the hooks are in place before Megatron loads, or call "
               "mindspeed_prof.profile() in a plain loop")
    return (f"--profile was given, but {script} ran no loop mindspeed_prof hooks, so nothing "
            f"was profiled: {what}. mindspeed_prof records Megatron's training loop "
            f"(megatron.training pretrain/train), its inference engines (StaticInferenceEngine, "
            f"DynamicInferenceEngine) and MindSpeed-LLM's generate; {fix}.")


def deactivate():
    """Undo every patch and forget the activation (tests, MindSpeed's repatch)."""
    registry.undo()
    sigterm.uninstall()
    import_hooks.forget_all()
    try:
        atexit.unregister(_warn_if_not_connected)
    except Exception:  # noqa: BLE001
        pass
    state.reset()
