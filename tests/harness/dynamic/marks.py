"""What the dynamic-engine tests need, as pytest marks shared by every test file that runs it:
the megatron-core version (0.19 on the Python 3.12 leg; 0.17.x and 0.18.x in the opt-in tier of
older engines, see README.md), the server's packages, and the opt-in tier's Megatron-LM checkout
(``MEGATRON_LM_PATH``)."""

import importlib.metadata
import importlib.util
import os

import pytest

try:
    from packaging.version import Version

    CORE = Version(importlib.metadata.version("megatron-core"))
except (ImportError, importlib.metadata.PackageNotFoundError):
    CORE = None

FOUND = f"found {CORE or 'none'}"
TOO_OLD = CORE is None or CORE < Version("0.19")
# Engines the profiling supports: 0.17 and 0.18 have the same engine targets as 0.19 (their
# servers lack the profile routes, which --profile then adds: patches/dynamic_control.py).
ENGINE_TOO_OLD = CORE is None or CORE < Version("0.17")
BEFORE_0_19 = TOO_OLD and not ENGINE_TOO_OLD  # 0.17.x / 0.18.x: the routes are ours

# every test of a file that checks the harness against 0.19's own code (FACTS.md)
MODULE_MARKS = [
    pytest.mark.current_megatron,
    pytest.mark.e2e,
    pytest.mark.skipif(TOO_OLD, reason=f"the dynamic engine needs megatron-core >= 0.19 "
                                       f"({FOUND}): the Python 3.12 leg"),
]
# every test of a file that profiles the engine: 0.19, and 0.17/0.18 in the opt-in tier
ENGINE_MARKS = [
    pytest.mark.current_megatron,
    pytest.mark.e2e,
    pytest.mark.skipif(ENGINE_TOO_OLD, reason=f"the dynamic engine is profiled from "
                                              f"megatron-core 0.17 ({FOUND}): the Python 3.12 "
                                              f"leg, or the opt-in tier of 0.17/0.18"),
]
needs_high_level_api = pytest.mark.skipif(
    CORE is not None and CORE < Version("0.18"),
    reason=f"MegatronLLM / MegatronAsyncLLM (megatron.core.inference.apis) come with "
           f"megatron-core 0.18 ({FOUND})")

SERVER_DEPS = ("quart", "hypercorn", "zmq", "msgpack")
MISSING = [name for name in SERVER_DEPS if importlib.util.find_spec(name) is None]
# Only where megatron-core is new enough, so an old leg reports the version, not the deps.
needs_server_deps = pytest.mark.skipif(
    bool(MISSING) and not ENGINE_TOO_OLD, reason=f"the dynamic server needs "
                                                 f"{', '.join(MISSING)}: pip install quart "
                                                 f"hypercorn pyzmq msgpack")

CHECKOUT = os.environ.get("MEGATRON_LM_PATH")
REAL_TOOL = bool(CHECKOUT) and os.path.exists(
    os.path.join(CHECKOUT or "", "tools", "run_dynamic_text_generation_server.py"))
real_tool_only = pytest.mark.skipif(
    not REAL_TOOL, reason="opt-in real tier: set MEGATRON_LM_PATH to a Megatron-LM checkout of "
                          "the installed megatron-core's tag (git worktree add DIR core_v0.19.0; "
                          "pip install six regex pydantic einops)")
