"""Which roles of a verl worker profile, with what: read from the worker's config (never verl's
objects beyond plain mappings, so it is testable without verl).

Sources, one per job:
- the role YAML (``arguments/roles.py``'s format): ``actor_rollout_ref.mindspeed_prof`` in verl's
  config (a path, or the mapping itself: ``+actor_rollout_ref.mindspeed_prof.roles.actor...``),
  else the file ``MINDSPEED_PROF_CONFIG`` names;
- verl's own profiler settings, with ``global_profiler.tool=mindspeed_prof``:
  ``global_profiler.steps`` / ``save_path`` and each role's ``profiler.enable`` / ``ranks`` /
  ``all_ranks``, translated by ``from_verl_profiler`` into the same mapping (the TaskRunner puts
  it under the key above, since the workers never see ``global_profiler``).
"""

import dataclasses
import os
from typing import Any, Dict, Mapping, Optional, Tuple

from mindspeed_prof.config.profiler_config import ProfilerConfig
from mindspeed_prof.errors import ConfigError

CONFIG_KEY = "mindspeed_prof"
TOOL = "mindspeed_prof"  # global_profiler.tool / <role>.profiler.tool value that means "ours"
# What each role of the colocated worker runs, as stages (one per worker method).
ROLE_STAGES: Dict[str, Tuple[str, ...]] = {
    "actor": ("old_logprob", "update"), "ref": ("ref_logprob",), "rollout": ("generate",)}
# Roles other verl workers run: allowed in a shared role YAML, never profiled by this worker.
OTHER_ROLES = ("critic", "reward", "teacher")
# verl 0.9.1's DistProfiler tools: with one of them enabled verl starts its own profiler.
VERL_TOOLS = ("npu", "nsys", "torch", "torch_memory", "precision_debugger")


def plain(value):
    """A verl (OmegaConf) config node as plain Python values; anything else as it is."""
    try:
        from omegaconf import OmegaConf
    except ImportError:  # no omegaconf, so no verl config node either
        return value
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def source(worker_config: Mapping):
    """The role YAML for this worker: (a path, a mapping or None for MINDSPEED_PROF_CONFIG,
    where it came from)."""
    value = plain(worker_config.get(CONFIG_KEY))
    where = f"actor_rollout_ref.{CONFIG_KEY}"
    if value is None:
        path = os.environ.get("MINDSPEED_PROF_CONFIG", "").strip()
        return (None, f"MINDSPEED_PROF_CONFIG={path}") if path else (None, None)
    if isinstance(value, (str, Mapping)):
        return value, where
    raise ConfigError(f"{where}: give the path of a role YAML file or the role YAML's mapping "
                      f"(profile_* keys and roles:), not a {type(value).__name__}.")


def _listed_roles(value, where) -> Optional[tuple]:
    from mindspeed_prof.arguments.roles import ROLES_KEY
    from mindspeed_prof.arguments.yaml_file import read_mapping

    if value is None:
        path = os.environ.get("MINDSPEED_PROF_CONFIG", "").strip()
        value = read_mapping(path, where) if path else {}
    elif isinstance(value, str):
        value = read_mapping(value, f"{where}={value}")
    roles = value.get(ROLES_KEY)
    return tuple(str(name) for name in roles) if isinstance(roles, Mapping) else None


def role_configs(worker_config: Mapping, roles_here) -> Tuple[Dict[str, ProfilerConfig], bool]:
    """({role: its ProfilerConfig} for the roles this worker runs that the role YAML asks for,
    whether the YAML lists them by name); ({}, False) when no role YAML is given. With a
    ``roles:`` mapping only the roles it lists profile (a colocated worker runs roles the user
    may not care about); without one, every role does."""
    from mindspeed_prof.arguments.messages import closest
    from mindspeed_prof.arguments.roles import role_config

    value, where = source(worker_config)
    if where is None:
        return {}, False
    listed = _listed_roles(value, where)
    known = tuple(ROLE_STAGES) + OTHER_ROLES
    for name in listed or ():
        if name not in known:
            close = closest(name, known)
            hint = f"did you mean {close!r}? " if close else ""
            raise ConfigError(f"{where}: roles.{name} is no role of a verl job; {hint}verl's "
                              f"ActorRolloutRefWorker runs {', '.join(ROLE_STAGES)}.")
    configs = {}
    for role in roles_here:
        if listed is not None and role not in listed:
            continue
        configs[role] = _with_stages(role, role_config(role, value), where)
    return configs, listed is not None


def _with_stages(role, config, where):
    """Each worker method is one stage: by default a role records all of its own."""
    stages = ROLE_STAGES[role]
    if not config.profile_stages:
        return dataclasses.replace(config, profile_stages=stages)
    unknown = [name for name in config.profile_stages if name not in stages]
    if unknown:
        raise ConfigError(f"{where}: roles.{role}.profile_stages {', '.join(unknown)}: verl's "
                          f"{role} runs the stages {', '.join(stages)} here; pick from those.")
    return config


def verl_profiler_conflicts(worker_config: Mapping, roles_here, rank: int) -> list:
    """verl's own profilers that would run in this worker's process on this rank: the per-role
    ``profiler`` blocks it reads (verl 0.9.1: the worker's own DistProfiler takes the actor's
    block, else the rollout's, else the ref's; the inner actor and ref engines take theirs),
    with a verl tool and ``enable``. Each starts the process's one profiler."""
    outer = next(role for role in ("actor", "rollout", "ref") if role in roles_here)
    found = []
    for role in dict.fromkeys((outer, *[r for r in ("actor", "ref") if r in roles_here])):
        block = plain((worker_config.get(role) or {}).get("profiler")) or {}
        if not block.get("enable") or block.get("tool") not in VERL_TOOLS:
            continue
        ranks = block.get("ranks") or []
        if block.get("all_ranks") or rank in ranks or (not ranks and rank == 0):
            found.append(f"actor_rollout_ref.{role}.profiler (tool={block.get('tool')}, "
                         f"enable=True)")
    return found


def from_verl_profiler(config: Mapping) -> Optional[dict]:
    """With ``global_profiler.tool=mindspeed_prof``: verl's profiler settings as a role YAML
    mapping; None otherwise. Per-role ``tool`` overrides keep their meaning: a role whose block
    names another tool (``rollout.profiler.tool=torch`` for vLLM's own profiler) is not ours."""
    config = plain(config)
    glob = config.get("global_profiler") or {}
    if glob.get("tool") != TOOL:
        return None
    steps = glob.get("steps")
    if not steps:
        raise ConfigError(f"global_profiler.tool={TOOL} needs global_profiler.steps (the RL "
                          f"steps to profile, e.g. global_profiler.steps=[2,3]).")
    mapping: Dict[str, Any] = {"profile": True, "profile_steps": [int(step) for step in steps], "roles": {}}
    if glob.get("save_path"):
        mapping["profile_save_path"] = str(glob["save_path"])
    blocks = config.get("actor_rollout_ref") or {}
    for role in ROLE_STAGES:
        block = (blocks.get(role) or {}).get("profiler") or {}
        if block.get("tool", TOOL) != TOOL or not block.get("enable"):
            continue
        ranks = "all" if block.get("all_ranks") else ",".join(map(str, block.get("ranks") or [0]))
        mapping["roles"][role] = {"profile_ranks": ranks}
    return mapping
