"""Which torch_npu wheel this fake impersonates, fixed once at import time.

Behaviour that differs between wheels is gated on the flags below rather than on
scattered version comparisons, so each difference is documented exactly once.
"""

import os

VERSION_ENV = "FAKE_TORCH_NPU_VERSION"
DEFAULT_RELEASE = "2.7.1"

# release tag -> (torch_npu.__version__, CANN version written to profiler_info.json)
_RELEASES = {
    "2.6.0": ("2.6.0", "8.1.RC1"),
    "2.7.1": ("2.7.1.post2", "8.2.RC1"),
    "2.14.0": ("2.14.0", "8.5.0"),
}


def _select_release() -> str:
    release = os.environ.get(VERSION_ENV) or DEFAULT_RELEASE
    if release not in _RELEASES:
        # A typo must not silently fall back to another wheel's behaviour.
        raise ValueError(
            f"{VERSION_ENV}={release!r} is not a faked torch_npu release; "
            f"use one of {', '.join(_RELEASES)}."
        )
    return release


RELEASE = _select_release()
VERSION = tuple(int(part) for part in RELEASE.split("."))
__version__, CANN_VERSION = _RELEASES[RELEASE]


def at_least(major: int, minor: int, patch: int = 0) -> bool:
    return VERSION >= (major, minor, patch)


# _ExperimentalConfig
HAS_MSTX = at_least(2, 7, 1)
AIC_DEFAULT_IS_PIPE_UTILIZATION = at_least(2, 10)
EXPORT_TYPE_DEFAULT_IS_TEXT = at_least(2, 10)
UPGRADES_AICORE_NONE_ABOVE_LEVEL0 = not at_least(2, 10)
HAS_HOST_SYS_NUMA = at_least(2, 11)
BOOL_WORD = "bool" if at_least(2, 7, 1) else "boolean"

# schedule / profile signatures
HAS_SKIP_FIRST_WAIT = at_least(2, 11)
HAS_CUSTOM_TRACE_ID = at_least(2, 11)
HAS_EXECUTION_TRACE_OBSERVER = at_least(2, 14)
HAS_CHILD_THREAD_PROFILING = at_least(2, 7, 1)

# runtime behaviour
RUN_DIR_TIME_IS_UTC = not at_least(2, 7, 1)
CHROME_TRACE_NEEDS_JSON_SUFFIX = not at_least(2, 11)
NPU_NOT_SET_TYPO = "uesd" if not at_least(2, 11) else "used"
SYNCHRONIZES_ON_STOP = at_least(2, 11)
GUARDS_MSPROF_ENV = at_least(2, 11)
PREFERS_WARNING_DISABLE_ENV = at_least(2, 14)

# parsing
WRITES_ANALYSE_DONE = at_least(2, 10)
ANNOUNCES_PARSE_MODE = at_least(2, 10)
KERNEL_FULL_HEADERS_BY_LEVEL = at_least(2, 10)
KERNEL_BLOCK_COLUMN = "Block Num" if at_least(2, 10) else "Block Dim"
KERNEL_LEVEL0_SHAPE_COLUMNS = at_least(2, 14)
LEVEL0_TASK_INFO_IS_NA = at_least(2, 14)
WRITES_TASK_TIME = at_least(2, 11)
PARSER_LOG_HAS_MILLISECONDS = at_least(2, 7, 1)
PRINTS_PARSE_FAILURE = not at_least(2, 11)
PARSER_ENTRY_SWALLOWS_ERRORS = at_least(2, 7, 1)

# memory and mstx
# (2.11 still has the old forms, 2.13 the new ones; 2.12 was not read)
SNAPSHOT_TAKES_POOL_ID = at_least(2, 13)  # _npu_memorySnapshot(mempool_id), METH_O
DUMP_SNAPSHOT_OWNER_WRITE_ONLY = not at_least(2, 13)  # os.open(O_WRONLY | O_CREAT, S_IWUSR)
SNAPSHOT_HAS_FX_AUGMENT = at_least(2, 13)  # _snapshot/_dump_snapshot(augment_with_fx_traces=)
HAS_MSTX_PUSH_POP = at_least(2, 10)  # mstx.range_push/range_pop and mstx.annotate
HAS_STEP_MSTX_RANGE = at_least(2, 10)  # profile.step wraps each step in a ProfilerStep#N range
