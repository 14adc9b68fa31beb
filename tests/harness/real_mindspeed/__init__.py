"""The real MindSpeed and MindSpeed-LLM on CPU (opt-in tier): where the checkouts are, the
Python path that serves them, and the wrapper scripts that run their entry scripts."""

import os
import re

from harness.real_megatron import overlay

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUTS = ("MINDSPEED_LLM_PATH", "MINDSPEED_PATH", "MEGATRON_LM_PATH")


# Inserted after ``if __name__ == "__main__":`` of an entry script: what a MindSpeed feature that
# re-applies patches after argument parsing does. The model provider runs after Megatron's args
# are validated, i.e. once mindspeed_prof's loop hooks are in place.
REPATCH_IN_MODEL_PROVIDER = """\
    def _repatching(provider):
        def provider_after_repatch(*args, **kwargs):
            from mindspeed.megatron_adaptor import repatch
            repatch({})
            return provider(*args, **kwargs)
        return provider_after_repatch
    model_provider = _repatching(model_provider)
"""


def missing():
    """The checkout variables that are unset (the tier is skipped while any is)."""
    return [name for name in CHECKOUTS if not os.environ.get(name)]


def python_path(folder):
    """Megatron-LM's training code (not its core: the wheel's), MindSpeed, MindSpeed-LLM, then
    the caller's own PYTHONPATH (a mindspeed_prof checkout under test)."""
    megatron = os.path.join(folder, "megatron_lm")
    if not os.path.isdir(megatron):
        overlay.build(os.environ["MEGATRON_LM_PATH"], megatron)
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([megatron, os.environ["MINDSPEED_PATH"],
                            os.environ["MINDSPEED_LLM_PATH"], *inherited])


def wrapper(folder, script):
    """Write ``run_<script>.py`` into ``folder``: it runs ``script`` on CPU with the NPU stubs."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "run_" + os.path.basename(script))
    with open(os.path.join(HERE, "run_script.py")) as source:
        text = source.read()
    text = re.sub(r"^HARNESS = .*$", f"HARNESS = {os.path.dirname(HERE)!r}", text, flags=re.M)
    text = re.sub(r"^SCRIPT = None$", f"SCRIPT = {os.path.abspath(script)!r}", text, flags=re.M)
    with open(path, "w") as target:
        target.write(text)
    return path


def script_copy(folder, script, *edits):
    """A copy of ``script`` in ``folder`` with each ``(prefix, text)`` edit's text inserted after
    the first line starting with ``prefix`` (how a user edits an entry script); the original is
    never touched."""
    with open(script) as source:
        lines = source.read().splitlines(keepends=True)
    for prefix, text in edits:
        at = next(i for i, line in enumerate(lines) if line.startswith(prefix)) + 1
        lines[at:at] = [text if text.endswith("\n") else text + "\n"]
    os.makedirs(folder, exist_ok=True)
    copy = os.path.join(folder, os.path.basename(script))
    with open(copy, "w") as target:
        target.write("".join(lines))
    return copy
