"""The readers' own dependencies (pyarrow, numpy, pysimdjson, msgspec): one place imports them.

A package that cannot be imported (left out by ``pip install --no-deps``, or shadowed by a
clashing conda build that raises something else on import) is not a damaged profile: every
reader imports its parser through ``need``, which turns any failure to import into
``MissingDependency``, naming the package and the command that installs it. No reader catches
it (it is neither a ``ValueError`` nor an ``ImportError``, the two kinds a reader turns into a
verdict or a skipped table), so ``check`` and ``summary`` stop with exit 2 and that message
instead of calling every file corrupt. The parsers are still imported only when a file is read,
so a ``check`` answered from the cache pays for none of them.
"""

import importlib
import sys
from contextlib import contextmanager
from typing import Iterator

from ..errors import ConfigError

# module -> the distribution that provides it, as setup.py's install_requires names it
PACKAGES = {"pyarrow": "pyarrow>=14", "numpy": "numpy", "simdjson": "pysimdjson>=5",
            "msgspec": "msgspec>=0.18"}


class MissingDependency(Exception):
    """A reader's parser cannot be imported; the message names it and the fix."""


def need(module: str):
    """``importlib.import_module(module)``, or ``MissingDependency`` whatever the import raised."""
    loaded = sys.modules.get(module)
    if loaded is not None:  # readers ask per block: import_module takes the import lock
        return loaded
    try:
        return importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - a broken install raises anything on import
        top = module.split(".")[0]
        package = PACKAGES.get(top, top)
        raise MissingDependency(
            f"reading profiler output needs the Python package {package!r}, and `import "
            f"{module}` fails here ({type(exc).__name__}: {exc}), so no file was judged or "
            f"summarised. "
            f"Install it into this environment: `pip install \"{package}\"` (a `pip install "
            f"--no-deps` of mindspeed_prof leaves it out; where a conda package of the same "
            f"name clashes, `pip install --force-reinstall \"{package}\"` or `conda install "
            f"-c conda-forge {package.split('>')[0]}`).") from None


@contextmanager
def as_usage_error() -> Iterator[None]:
    """Around a reader command: a missing parser becomes a usage error (exit 2, one line)."""
    try:
        yield
    except MissingDependency as exc:
        raise ConfigError(str(exc)) from None
