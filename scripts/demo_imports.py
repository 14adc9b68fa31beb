"""Check, before a demo starts torchrun, that this Python imports what the demo needs.

Usage: python scripts/demo_imports.py DEMO MODULE...   (exit 0, silent, when every MODULE imports)

A module that does not import is named in one line, with the pip package that provides it, and
the exit status is 1: without this check a missing package shows as a torchrun traceback whose
cause sits tens of lines into a rank's log. Every package named here is in setup.py's ``demo``
extra (tests/unit/project/test_demo_scripts.py checks it)."""

import importlib
import sys

# module a demo imports -> the pip package that provides it
PACKAGES = {
    "torch": "torch",
    "megatron.core": "megatron-core",
    "plotly": "plotly",
    "matplotlib": "matplotlib",
    "flask": "flask",
    "flask_restful": "flask-restful",
    "tqdm": "tqdm",
}


def missing(modules: list[str]) -> str | None:
    """The line naming the first of ``modules`` that does not import, or None."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as error:  # an ImportError, or a package broken at import time
            return (f"{module} (pip package {PACKAGES[module]}) does not import in "
                    f"{sys.executable}: {type(error).__name__}: {error}")
    return None


def main(argv: list[str]) -> int:
    demo, modules = argv[0], argv[1:]
    unknown = [module for module in modules if module not in PACKAGES]
    if unknown:
        print(f"{demo}: no pip package known for {', '.join(unknown)} (scripts/demo_imports.py)")
        return 1
    line = missing(modules)
    if line is None:
        return 0
    print(f"{demo} needs {line}; install the demo's packages: pip install '.[demo]'")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
