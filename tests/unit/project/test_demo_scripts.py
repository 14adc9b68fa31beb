"""The demos check what they import before torchrun, and setup.py's ``demo`` extra installs it:
a clean clone's ``pip install '.[demo]'`` once lacked the inference server's Flask,
flask-restful and tqdm (issue 35)."""

import os
import re
import runpy

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEMOS = ("scripts/demo.sh", "scripts/demo_inference.sh")


def demo_extra():
    with open(os.path.join(REPO, "setup.py"), encoding="utf-8") as handle:
        text = handle.read()
    listed = re.search(r'"demo": \[([^\]]*)\]', text)[1]
    return {re.split(r"[=<>]", name)[0] for name in re.findall(r'"([^"]+)"', listed)}


def checked_modules(script):
    """The modules ``script`` hands scripts/demo_imports.py (its continuation lines joined)."""
    with open(os.path.join(REPO, script), encoding="utf-8") as handle:
        text = handle.read().replace("\\\n", " ")
    call = re.search(r"demo_imports\.py\" (\S+) ([^\n]+)", text)
    assert call is not None, f"{script} does not check its imports"
    assert call[1] == script
    return call[2].split()


def test_every_module_a_demo_checks_comes_from_a_package_of_the_demo_extra():
    packages = runpy.run_path(os.path.join(REPO, "scripts", "demo_imports.py"))["PACKAGES"]
    extra = demo_extra() | {"torch"}  # torch: the README's first set-up command, pinned
    for script in DEMOS:
        modules = checked_modules(script)
        assert modules, script
        assert [packages[m] for m in modules if packages[m] not in extra] == [], script


def test_the_inference_demo_checks_the_text_generation_servers_imports():
    assert {"megatron.core", "flask", "flask_restful", "tqdm"} <= \
        set(checked_modules("scripts/demo_inference.sh"))
    assert {"flask", "flask-restful", "tqdm"} <= demo_extra()
