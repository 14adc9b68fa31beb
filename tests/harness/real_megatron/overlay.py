"""A folder that exposes a Megatron-LM checkout without its ``megatron/core``."""

import os

from . import run_pretrain_gpt

KEEP_OUT = {"core"}


def build(checkout, folder):
    """Symlink the checkout's megatron packages (but core) and root modules into ``folder``."""
    package = os.path.join(folder, "megatron")
    os.makedirs(package, exist_ok=True)
    for name in os.listdir(os.path.join(checkout, "megatron")):
        if name not in KEEP_OUT and not name.startswith(("_", ".")):
            os.symlink(os.path.join(checkout, "megatron", name), os.path.join(package, name))
    for name in os.listdir(checkout):
        if name.endswith(".py") and name != "setup.py":
            os.symlink(os.path.join(checkout, name), os.path.join(folder, name))
    wrapper = os.path.join(folder, "run_pretrain_gpt.py")
    with open(run_pretrain_gpt.__file__) as source, open(wrapper, "w") as target:
        target.write(source.read().replace(
            'HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))',
            f'HARNESS = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))!r}'))
    return wrapper
