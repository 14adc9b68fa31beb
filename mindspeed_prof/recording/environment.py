"""Facts about the process that the manifest records: versions and the rank's identity.

Versions are read from package metadata, so recording megatron-core's version never imports
Megatron (the core must not), and torch_npu's only when it is already imported. MindSpeed and
MindSpeed-LLM often run from source trees on ``PYTHONPATH`` (their READMEs say so), where there
is no metadata: their version is then the package's own ``__version__``, else the version string
of the tree's ``setup.py``/``pyproject.toml``, read as text (never executed), and says so:
``"0.12.1 (source tree /path/MindSpeed)"``.
"""

import ast
import importlib.metadata
import importlib.util
import os
import platform
import sys
from typing import Optional

try:
    import tomllib
except ImportError:  # Python 3.10: pyproject.toml versions are not read
    tomllib = None  # type: ignore[assignment]


def _dist_version(*names):
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _package_dir(package: str) -> Optional[str]:
    """Where ``package`` is (or would be) imported from, without importing it."""
    module = sys.modules.get(package)
    path = getattr(module, "__file__", None) if module is not None else None
    if path is None:
        try:
            spec = importlib.util.find_spec(package)  # a top-level name: nothing is executed
        except (ImportError, ValueError):
            return None
        path = spec.origin if spec is not None else None
    return os.path.dirname(os.path.abspath(path)) if path else None


def _setup_py_version(path: str) -> Optional[str]:
    """``__version__ = '0.12.1'`` (MindSpeed, MindSpeed-LLM) or ``setup(version='...')``."""
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str) \
                and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets):
            return node.value.value
        if isinstance(node, ast.keyword) and node.arg == "version" \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node.value.value
    return None


def _pyproject_version(path: str) -> Optional[str]:
    if tomllib is None:
        return None
    try:
        with open(path, "rb") as handle:
            version = tomllib.load(handle).get("project", {}).get("version")
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None


def _version(package: str, *dists: str) -> Optional[str]:
    """An installed distribution's version when ``package`` is imported from that install;
    else (a source tree on the path, maybe beside an older install) the tree's own."""
    folder = _package_dir(package)
    for name in dists:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        base = os.path.abspath(str(dist.locate_file("")))
        if folder is None or os.path.commonpath([base, folder]) == base:
            return dist.version
        break
    return _source_version(package, folder) or _dist_version(*dists)


def _source_version(package: str, folder: Optional[str]) -> Optional[str]:
    own = getattr(sys.modules.get(package), "__version__", None)
    if isinstance(own, str):
        return f"{own} ({package}.__version__)"
    if folder is None:
        return None
    tree = os.path.dirname(folder)
    for name, read in (("pyproject.toml", _pyproject_version), ("setup.py", _setup_py_version)):
        path = os.path.join(tree, name)
        version = read(path) if os.path.isfile(path) else None
        if version:
            return f"{version} (source tree {tree})"
    return None


def versions():
    import torch

    found = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_npu": None,
        "cann": None,
        "megatron_core": _dist_version("megatron-core", "megatron_core"),
        "mindspeed": _version("mindspeed", "mindspeed"),
        "mindspeed_llm": _version("mindspeed_llm", "mindspeed-llm", "mindspeed_llm"),
    }
    torch_npu = sys.modules.get("torch_npu")
    if torch_npu is not None:
        found["torch_npu"] = getattr(torch_npu, "__version__", None)
        version_module = getattr(torch_npu, "version", None)
        found["cann"] = getattr(version_module, "cann", None) or os.environ.get("ASCEND_TOOLKIT_VERSION")
    return found


def rank_from_env():
    """(rank, world_size, local_rank) from torch.distributed when initialised, else torchrun's env."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0))
    except Exception:  # noqa: BLE001 - fall back to the environment
        pass
    return (int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
            int(os.environ.get("LOCAL_RANK", 0)))
