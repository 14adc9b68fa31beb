"""Canonical spellings of torch_npu's level / export-type / AI-core-metric names.

Users copy these from three places (MindSpeed-LLM flags, torch_npu constants, profiler_info.json),
so each name is accepted in every spelling, case-insensitively, and normalised to one form.
"""

import re

from ..errors import ConfigError

LEVELS = ("level_none", "level0", "level1", "level2")
EXPORT_TYPES = ("text", "db")
ANALYSE_MODES = ("sync", "async", "offline")
BACKENDS = ("auto", "npu", "torch")
HOST_SYS = ("cpu", "mem", "disk", "network", "osrt", "numa")

# torch_npu attribute name -> the ACL constant torch_npu stores in profiler_info.json.
AIC_METRICS = {
    "AiCoreNone": "ACL_AICORE_NONE",
    "PipeUtilization": "ACL_AICORE_PIPE_UTILIZATION",
    "ArithmeticUtilization": "ACL_AICORE_ARITHMETIC_UTILIZATION",
    "Memory": "ACL_AICORE_MEMORY_BANDWIDTH",
    "MemoryL0": "ACL_AICORE_L0B_AND_WIDTH",
    "MemoryUB": "ACL_AICORE_MEMORY_UB",
    "ResourceConflictRatio": "ACL_AICORE_RESOURCE_CONFLICT_RATIO",
    "L2Cache": "ACL_AICORE_L2_CACHE",
    "MemoryAccess": "ACL_AICORE_MEMORY_ACCESS",
}


def _choice(flag, value, choices):
    text = str(value).strip().lower()
    for choice in choices:
        if text == choice:
            return choice
    raise ConfigError(f"{flag} {value!r} is not one of {', '.join(choices)}; "
                      f"pick one of them (case does not matter).")


def level(value, flag="--profile-level"):
    """``Level1``, ``level1`` and ``LEVEL1`` are the same level; ``Level_none`` too."""
    return _choice(flag, value, LEVELS)


def analyse_mode(value, flag="--profile-analyse"):
    return _choice(flag, value, ANALYSE_MODES)


def backend(value, flag="--profile-backend"):
    return _choice(flag, value, BACKENDS)


def export_type(value, flag="--profile-export-type"):
    """``text``, ``db`` or both (``text,db``), returned in that canonical order."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    wanted = {_choice(flag, item, EXPORT_TYPES) for item in items if str(item).strip()}
    if not wanted:
        raise ConfigError(f"{flag} is empty; use text, db or text,db.")
    return ",".join(t for t in EXPORT_TYPES if t in wanted)


def aic_metrics(value, flag="--profile-aic-metrics"):
    """Accepts ``PipeUtilization`` or ``ACL_AICORE_PIPE_UTILIZATION`` in any case; None stays None."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in ("", "none", "default"):
        return None if text != "none" else "AiCoreNone"
    for name, acl in AIC_METRICS.items():
        if text in (name.lower(), acl.lower()):
            return name
    raise ConfigError(f"{flag} {value!r} is not an AI core metric; use one of "
                      f"{', '.join(AIC_METRICS)} (or its ACL_AICORE_* name).")


def _name_list(values):
    """``a b`` or ``a,b`` (a string or a list of them) -> lower-case names, order kept,
    duplicates dropped."""
    if values is None:
        return ()
    if isinstance(values, (str, int)):
        values = [values]
    result = []
    for raw in values:
        for item in str(raw).split(","):
            item = item.strip().lower()
            if item and item not in result:
                result.append(item)
    return tuple(result)


def host_sys(values, flag="--profile-host-sys"):
    """A list such as ``cpu mem`` or ``cpu,mem``; order kept, duplicates dropped."""
    result = _name_list(values)
    for item in result:
        if item not in HOST_SYS:
            raise ConfigError(f"{flag} {item!r} is not a host system metric; use any of "
                              f"{', '.join(HOST_SYS)}.")
    return result


_STAGE_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_-")


def stages(values, flag="--profile-stages"):
    """RL stage names (``old_logprob update`` or ``old_logprob,update``), each a folder name
    under ``{save}/{role}/``: lower case letters, digits, ``_`` and ``-``; order kept."""
    result = _name_list(values)
    for item in result:
        if not set(item) <= _STAGE_CHARS:
            raise ConfigError(f"{flag} {item!r} is not a stage name; use the names your "
                              f"workers pass to prof.stage() (letters, digits, _ and -).")
    return result


def mstx_domains(values, flag):
    """mstx domain names (``communication``, or ``a,b``): kept as given (torch_npu compares
    them exactly), order kept, duplicates dropped."""
    if values is None:
        return ()
    result = []
    for raw in [values] if isinstance(values, (str, int)) else values:
        for item in str(raw).split(","):
            item = item.strip()
            if item and item not in result:
                result.append(item)
    if not result and values:
        raise ConfigError(f"{flag} names no domain; give mstx domain names, e.g. "
                          f"communication, or leave the flag out.")
    return tuple(result)


_ROLE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def role(value):
    """An RL role names a folder under the save path (``{save}/{role}/``): refuse what cannot
    be one (a separator, ``..``, a leading dot), whoever passes it in."""
    if not isinstance(value, str) or not _ROLE_NAME.match(value) or len(value) > 255:
        raise ConfigError(f"role {value!r} cannot name a folder under the save path; use letters, "
                          f"digits, '_', '-' or '.' (e.g. actor, ref, rollout).")
    return value
