"""Profilers (and allocator recorders) that torch_npu arms from the environment, behind our back.

One process runs one profiler (DESIGN §6). Megatron's own is switched off at hand-over, but
torch_npu starts others itself when ``import torch_npu`` runs, from environment variables alone
(read in ``torch_npu/profiler/_non_intrusive_profile.py`` and ``csrc/.../OptionsManager.cpp``
of every wheel from 2.6 to master):

- ``PROF_CONFIG_PATH=DIR`` (not a file): dynamic profiling. torch_npu calls
  ``dynamic_profile.init(DIR)`` at import and steps it from ``Optimizer.step``; a JSON file in DIR
  starts captures whenever it is edited. It takes precedence over the daemon below.
- ``MSMONITOR_USE_DAEMON=1`` (or the deprecated ``KINETO_USE_DAEMON=1``; MSMONITOR wins when both
  are set, even as ``0``): the msMonitor / dynolog client, through which a daemon starts
  captures in this process (``dyno nputrace``).
- ``PROFILER_SAMPLECONFIG`` / ``PROFILING_MODE``: msprof is collecting this process; torch_npu
  >= 2.11 then turns its profiler API off (``check_msprof_env``), older wheels collect twice.
- ``OOM_SNAPSHOT_ENABLE`` (1 or 2): torch_npu records the allocator's history from start-up and
  dumps ``oom_snapshot_*.pickle`` itself; beside ``--profile-memory-*`` the two would share one
  history (ours switches it off at each window's end).

These matter only where torch_npu is installed (without it nothing reads them). Each is refused
at start-up with the fix, exit 2, as Megatron's ``--use-pytorch-profiler`` is.
"""

import importlib.util
import os
from dataclasses import dataclass
from typing import List, Mapping, Optional

from ..config.profiler_config import ProfilerConfig


@dataclass(frozen=True)
class Armed:
    variable: str  # the environment variable that arms it, as set
    what: str      # what it arms, in words
    fix: str       # what to do
    clash: str = ("it cannot run beside mindspeed_prof's profiler: two profilers in one "
                  "process lose data or crash")

    def message(self) -> str:
        return f"{self.variable} {self.what}; {self.clash}. Fix: {self.fix}."


def torch_npu_installed() -> bool:
    """Whether ``import torch_npu`` would find a package (nothing is imported)."""
    try:
        return importlib.util.find_spec("torch_npu") is not None
    except (ImportError, ValueError):
        return False


def _daemon(env: Mapping[str, str]) -> Optional[Armed]:
    # torch_npu: int(MSMONITOR_USE_DAEMON or KINETO_USE_DAEMON or 0) == 1
    name = "MSMONITOR_USE_DAEMON" if env.get("MSMONITOR_USE_DAEMON") else "KINETO_USE_DAEMON"
    value = env.get(name) or "0"
    try:
        armed = int(value) == 1
    except ValueError:
        armed = False  # torch_npu says the value is invalid and uses 0
    if not armed:
        return None
    return Armed(f"{name}={value}", "arms torch_npu's msMonitor/dynolog client (a daemon can "
                                    "start a capture in this process at any step)",
                 f"unset {name} for this job (or set it to 0), or drop --profile and use "
                 f"dynolog alone")


def armed_profilers(config: ProfilerConfig, env: Optional[Mapping[str, str]] = None,
                    installed: Optional[bool] = None) -> List[Armed]:
    """What torch_npu would start beside ours in this environment (empty when profiling is off
    or torch_npu is not installed)."""
    env = os.environ if env is None else env
    if not config.profile or not (torch_npu_installed() if installed is None else installed):
        return []
    found = []
    path = env.get("PROF_CONFIG_PATH", "")
    if path and not os.path.isfile(path):
        found.append(Armed(f"PROF_CONFIG_PATH={path}", "arms torch_npu's dynamic profiling "
                                                       "(started at `import torch_npu`, stepped "
                                                       "by every optimizer step)",
                           "unset PROF_CONFIG_PATH for this job, or drop --profile and use "
                           "torch_npu's dynamic profiling alone"))
    elif not path:
        daemon = _daemon(env)
        if daemon is not None:
            found.append(daemon)
    for name in ("PROFILER_SAMPLECONFIG", "PROFILING_MODE"):
        if env.get(name):
            found.append(Armed(f"{name}={env[name]}", "says msprof is collecting this process "
                                                      "(torch_npu >= 2.11 turns its profiler "
                                                      "API off under msprof)",
                               f"run the job without msprof (unset {name}), or drop --profile "
                               f"and let msprof collect"))
            break
    oom = env.get("OOM_SNAPSHOT_ENABLE", "")
    memory = config.profile_memory_snapshot or config.profile_memory_oom
    if memory and oom.strip() not in ("", "0"):
        found.append(Armed(f"OOM_SNAPSHOT_ENABLE={oom}", "makes torch_npu record the allocator's "
                                                         "history and dump oom_snapshot_*.pickle "
                                                         "itself",
                           "unset OOM_SNAPSHOT_ENABLE (--profile-memory-oom dumps on "
                           "out-of-memory), or drop --profile-memory-snapshot/-oom",
                           "one allocator history cannot serve two recorders: mindspeed_prof "
                           "switches it off at each window's end"))
    return found
