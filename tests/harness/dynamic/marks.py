"""What the dynamic-engine tests need, as pytest marks shared by every test file that runs it:
megatron-core >= 0.19 (the Python 3.12 leg), the server's packages, and the opt-in tier's
Megatron-LM checkout (``MEGATRON_LM_PATH``)."""

import importlib.metadata
import importlib.util
import os

import pytest

try:
    from packaging.version import Version

    CORE = Version(importlib.metadata.version("megatron-core"))
except (ImportError, importlib.metadata.PackageNotFoundError):
    CORE = None

TOO_OLD = CORE is None or CORE < Version("0.19")
# every test of a file that runs the engine
MODULE_MARKS = [
    pytest.mark.current_megatron,
    pytest.mark.e2e,
    pytest.mark.skipif(TOO_OLD, reason=f"the dynamic engine needs megatron-core >= 0.19 "
                                       f"(found {CORE or 'none'}): the Python 3.12 leg"),
]

SERVER_DEPS = ("quart", "hypercorn", "zmq", "msgpack")
MISSING = [name for name in SERVER_DEPS if importlib.util.find_spec(name) is None]
# Only where megatron-core is new enough, so an old leg reports the version, not the deps.
needs_server_deps = pytest.mark.skipif(
    bool(MISSING) and not TOO_OLD, reason=f"the dynamic server needs {', '.join(MISSING)}: "
                                          "pip install quart hypercorn pyzmq msgpack")

CHECKOUT = os.environ.get("MEGATRON_LM_PATH")
REAL_TOOL = bool(CHECKOUT) and os.path.exists(
    os.path.join(CHECKOUT or "", "tools", "run_dynamic_text_generation_server.py"))
real_tool_only = pytest.mark.skipif(
    not REAL_TOOL, reason="opt-in real tier: set MEGATRON_LM_PATH to a Megatron-LM 0.19 checkout "
                          "(git worktree add DIR core_v0.19.0; pip install six regex pydantic "
                          "einops)")
