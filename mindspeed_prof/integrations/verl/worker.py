"""``ProfiledActorRolloutRefWorker``: verl's colocated worker, each role profiling itself.

A drop-in subclass of ``verl.workers.engine_workers.ActorRolloutRefWorker``: every method keeps
verl's dispatch attributes (``@register``'s, copied from verl's method, so worker groups bind and
dispatch it as verl's), runs verl's own method inside, and records it as one stage:

    compute_log_prob      -> actor   / old_logprob
    update_actor          -> actor   / update
    compute_ref_log_prob  -> ref     / ref_logprob
    rollout generation    -> rollout / generate   (a rollout generating in this process)
    update_weights(global_steps=g) -> the next methods belong to RL step g + 1 (steps.py)

With no role YAML (settings.py) nothing is profiled and no method is changed in behaviour.
Importing this module imports verl and checks its worker's shape (shape.py).
"""

import functools
import inspect

from mindspeed_prof import log
from mindspeed_prof.errors import ConfigError

from . import settings, shape
from .steps import WorkerProfilers

_verl = shape.load()  # imports verl; refuses a worker shape the integration does not know
VERSION = _verl.version
_Base = _verl.ActorRolloutRefWorker
BaseRollout, get_rollout_class = _verl.BaseRollout, _verl.get_rollout_class
_UPDATE_WEIGHTS = inspect.signature(_Base.update_weights)


def _keeps_dispatch(parent):
    """Our override carries the parent's name, docs and verl's dispatch attributes."""
    def decorate(method):
        functools.update_wrapper(method, parent)
        return method
    return decorate


class ProfiledActorRolloutRefWorker(_Base):  # type: ignore[misc,valid-type] # verl's, found at import
    """verl's ActorRolloutRefWorker with mindspeed_prof role profilers (module docstring)."""

    def __init__(self, config, role, *args, **kwargs):
        super().__init__(config, role, *args, **kwargs)
        self.mindspeed_prof = WorkerProfilers({}, VERSION)
        configs = planned_roles(config, _roles(role), warn=self.rank == 0)
        if not configs:
            return
        from mindspeed_prof.rl import role_profiler

        note = shape.untested_note(VERSION)
        total = _total_steps(config)
        profilers = {role: role_profiler(role, cfg, rank=self.rank, world_size=self.world_size,
                                         total_steps=total) for role, cfg in configs.items()}
        self.mindspeed_prof = WorkerProfilers(profilers, VERSION)
        conflicts = settings.verl_profiler_conflicts(config, _roles(role), self.rank)
        if conflicts and self.mindspeed_prof.active:
            self.mindspeed_prof.close("config error")
            raise ConfigError(
                f"verl's own profiler would run beside mindspeed_prof in this worker (rank "
                f"{self.rank}): {'; '.join(conflicts)}; one profiler runs per process. Set "
                f"global_profiler.tool={settings.TOOL} (verl then drives mindspeed_prof) or "
                f"that block's enable=False, or drop the role YAML.")
        if note and self.mindspeed_prof.active and self.rank == 0:
            log.warning(note)

    @_keeps_dispatch(_Base.init_model)
    def init_model(self, *args, **kwargs):
        result = super().init_model(*args, **kwargs)
        if "rollout" in self.mindspeed_prof.roles():
            self._profile_rollout()
        return result

    def _profile_rollout(self):
        rollout = self.rollout
        if type(rollout).generate_sequences is BaseRollout.generate_sequences:
            self.mindspeed_prof.close("config error")
            raise ConfigError(_SERVER_ROLLOUT.format(name=_rollout_name(self.config)))
        generate = rollout.generate_sequences
        profilers = self.mindspeed_prof

        @functools.wraps(generate)
        def generate_sequences(prompts, *args, **kwargs):
            # A validation pass is no RL step's work.
            if (getattr(prompts, "meta_info", None) or {}).get("validate"):
                return generate(prompts, *args, **kwargs)
            with profilers.stage("rollout", "generate"):
                return generate(prompts, *args, **kwargs)

        rollout.generate_sequences = generate_sequences

    @_keeps_dispatch(_Base.compute_log_prob)
    def compute_log_prob(self, *args, **kwargs):
        with self.mindspeed_prof.stage("actor", "old_logprob"):
            return super().compute_log_prob(*args, **kwargs)

    @_keeps_dispatch(_Base.update_actor)
    def update_actor(self, *args, **kwargs):
        with self.mindspeed_prof.stage("actor", "update"):
            return super().update_actor(*args, **kwargs)

    @_keeps_dispatch(_Base.compute_ref_log_prob)
    def compute_ref_log_prob(self, *args, **kwargs):
        with self.mindspeed_prof.stage("ref", "ref_logprob"):
            return super().compute_ref_log_prob(*args, **kwargs)

    @_keeps_dispatch(_Base.update_weights)
    async def update_weights(self, *args, **kwargs):
        result = await super().update_weights(*args, **kwargs)
        bound = _UPDATE_WEIGHTS.bind(self, *args, **kwargs)
        bound.apply_defaults()
        self.mindspeed_prof.weights_synced(bound.arguments.get("global_steps"))
        return result

    @_keeps_dispatch(_Base.start_profile)
    def start_profile(self, *args, **kwargs):
        self.mindspeed_prof.verl_started(kwargs.get("profile_step"))
        return super().start_profile(*args, **kwargs)



def planned_roles(config, roles, warn: bool = False):
    """{role: ProfilerConfig} this worker's roles profile with; raises ConfigError. Also run by
    the TaskRunner before any worker exists, so a usage error stops the job there."""
    configs, listed = settings.role_configs(config, roles)
    if "rollout" in configs and not _generates_here(config):
        if listed:
            raise ConfigError(_SERVER_ROLLOUT.format(name=_rollout_name(config)))
        del configs["rollout"]  # every role takes the top level: nothing to record here
        if warn:
            log.warning(f"rollout: verl's rollout {_rollout_name(config)!r} generates in its own "
                        f"server processes; this worker records actor and ref only "
                        f"(docs/rl.md, verl)")
    return configs


def _roles(role: str):
    """verl's role names this worker: actor, rollout, ref, actor_rollout, actor_rollout_ref."""
    parts = str(role).split("_")
    if not parts or not set(parts) <= set(settings.ROLE_STAGES):
        raise shape.UnknownVerlShape(
            f"verl {VERSION} built an ActorRolloutRefWorker with role {role!r}; the integration "
            f"knows roles made of {', '.join(settings.ROLE_STAGES)} (e.g. actor_rollout_ref).")
    return [name for name in settings.ROLE_STAGES if name in parts]


_SERVER_ROLLOUT = (
    "roles.rollout: verl's rollout {name!r} generates in its own server processes, not in this "
    "worker, so nothing of it can be recorded here; remove roles.rollout (or give it profile: "
    "false) and profile the server with verl's actor_rollout_ref.rollout.profiler "
    "(docs/rl.md, verl).")


def _rollout_name(config):
    return (config.get("rollout") or {}).get("name")


def _generates_here(config) -> bool:
    """Whether the rollout verl will build (``get_rollout_class``, as ``init_model`` does) runs
    ``generate_sequences`` in this process; the server rollouts keep BaseRollout's."""
    rollout = config.get("rollout") or {}
    try:
        cls = get_rollout_class(rollout.get("name"), rollout.get("mode", "async"))
    except Exception:  # verl's init_model reports an unknown rollout; don't pre-empt it
        return True
    return getattr(cls, "generate_sequences", None) is not BaseRollout.generate_sequences


def _total_steps(config):
    """The trainer writes its total into the worker's optimizer config (for the LR schedule)."""
    try:
        total = int(((config.get("actor") or {}).get("optim") or {}).get("total_training_steps"))
    except (TypeError, ValueError):
        return None
    return total if total > 0 else None
