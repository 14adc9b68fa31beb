"""patches/hooks.py is the one table of host hooks: every hook function a patch module defines is
a row of it, and every row names a function that exists."""

import ast
import importlib
import os

from mindspeed_prof.patches import hooks

PATCHES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "patches")


def defined_hooks():
    found = set()
    for name in os.listdir(PATCHES):
        if name.endswith(".py"):
            tree = ast.parse(open(os.path.join(PATCHES, name)).read())
            found |= {(name[:-3], node.name) for node in tree.body
                      if isinstance(node, ast.FunctionDef) and node.name.startswith("hook_")}
    return found


def test_every_hook_function_in_patches_is_a_row_of_the_table():
    assert ("megatron_loop", "hook_training_loop") in defined_hooks()  # the scan finds them
    assert defined_hooks() - set(hooks.OWNED_JOB_HOOKS) == set()


def test_every_row_of_the_table_names_a_hook_that_exists():
    for module, function in hooks.OWNED_JOB_HOOKS + hooks.ENGINE_HOOKS:
        assert callable(getattr(importlib.import_module(f"mindspeed_prof.patches.{module}"),
                                function))


def test_the_engines_are_hooked_at_activation_and_again_once_a_job_is_owned():
    assert set(hooks.ENGINE_HOOKS) <= set(hooks.OWNED_JOB_HOOKS)
    assert ("megatron_loop", "hook_training_loop") not in hooks.ENGINE_HOOKS
