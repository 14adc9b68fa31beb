"""A folder that exposes a Megatron-LM checkout without its ``megatron/core``."""

import os

from . import run_pretrain_gpt

KEEP_OUT = {"core"}


def release(checkout):
    """The checkout's (major, minor), read from megatron/core/package_info.py (not imported)."""
    import re

    with open(os.path.join(checkout, "megatron", "core", "package_info.py")) as handle:
        text = handle.read()
    return tuple(int(re.search(rf"^{name} = (\d+)", text, re.M).group(1))
                 for name in ("MAJOR", "MINOR"))


def build(checkout, folder, first_line=None):
    """Symlink the checkout's megatron packages (but core) and root modules into ``folder``;
    ``first_line`` (e.g. ``import mindspeed_prof.auto``) goes at the top of a copy of
    ``pretrain_gpt.py`` instead of a link (the import-line route)."""
    package = os.path.join(folder, "megatron")
    os.makedirs(package, exist_ok=True)
    for name in os.listdir(os.path.join(checkout, "megatron")):
        if name not in KEEP_OUT and not name.startswith(("_", ".")):
            os.symlink(os.path.join(checkout, "megatron", name), os.path.join(package, name))
    for name in os.listdir(checkout):
        if name == "pretrain_gpt.py" and first_line:
            with open(os.path.join(checkout, name)) as source, \
                    open(os.path.join(folder, name), "w") as target:
                target.write(first_line + "\n" + source.read())
        elif name.endswith(".py") and name != "setup.py":
            os.symlink(os.path.join(checkout, name), os.path.join(folder, name))
    wrapper = os.path.join(folder, "run_pretrain_gpt.py")
    with open(run_pretrain_gpt.__file__) as source, open(wrapper, "w") as target:
        target.write(source.read().replace(
            'HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))',
            f'HARNESS = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))!r}'))
    return wrapper
