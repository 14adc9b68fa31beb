"""verl's role map with the profiled worker: ``ProfiledTaskRunner`` and the ``main_ppo`` entry.

verl's ``run_ppo(config, task_runner_class)`` takes the TaskRunner as its extension point ("for
recipe to change TaskRunner"); ``ProfiledTaskRunner`` is verl 0.9.1's (legacy, ``RayPPOTrainer``)
TaskRunner whose ``add_actor_rollout_worker`` puts ``ProfiledActorRolloutRefWorker`` where verl
put ``ActorRolloutRefWorker``. The TaskRunner computes nothing and profiles nothing: it only
builds the role map and, with ``global_profiler.tool=mindspeed_prof``, writes verl's profiler
settings into the workers' config as their role YAML (settings.from_verl_profiler).

    python -m mindspeed_prof.integrations.verl.main_ppo trainer.use_v1=false ...   # verl's CLI
    run_ppo(config, task_runner_class=ProfiledTaskRunner)                          # in a recipe
"""

import ray

from mindspeed_prof.errors import ConfigError

from . import settings, shape
from .worker import VERSION, ProfiledActorRolloutRefWorker, _Base, planned_roles

VERL_RUNNER = shape.imports(shape.RUNNER_IMPORTS)


def _unwrap(remote_cls):
    return getattr(remote_cls, "__ray_actor_class__", remote_cls)


# verl's TaskRunner class is only reachable through its Ray wrapper; a subclass of it breaks
# the zero-argument super() in its __init__ once Ray ships the class to the actor's process, so
# the runner subclasses its (plain) base and takes TaskRunner.run as it is.
_TaskRunner = _unwrap(VERL_RUNNER.TaskRunner)


class _ProfiledTaskRunner(VERL_RUNNER.BaseTaskRunner):  # type: ignore[name-defined] # verl's
    def add_actor_rollout_worker(self, config):
        cls, group_cls = super().add_actor_rollout_worker(config)
        replaced = [role for role, remote in self.role_worker_mapping.items()
                    if _unwrap(remote) is _Base]
        if cls is not _Base or not replaced:
            raise shape.UnknownVerlShape(
                f"verl {VERSION}'s TaskRunner.add_actor_rollout_worker put "
                f"{getattr(cls, '__name__', cls)} in the role map, not "
                f"engine_workers.ActorRolloutRefWorker; the integration knows verl "
                f"{', '.join(shape.TESTED_VERSIONS)}'s role map.")
        for role in replaced:
            self.role_worker_mapping[role] = ray.remote(ProfiledActorRolloutRefWorker)
        return ProfiledActorRolloutRefWorker, group_cls

    def run(self, config):
        mapping = settings.from_verl_profiler(config)
        if mapping is not None:
            from omegaconf import open_dict

            arr = config.actor_rollout_ref
            if arr.get(settings.CONFIG_KEY) is not None:
                raise ConfigError(
                    f"global_profiler.tool={settings.TOOL} and actor_rollout_ref."
                    f"{settings.CONFIG_KEY} both configure mindspeed_prof; use one of them.")
            with open_dict(arr):
                arr[settings.CONFIG_KEY] = mapping
        # The role YAML's errors stop the job here, before Ray starts any worker (a worker's
        # __init__ error reaches the driver as ActorDiedError text). Nothing is profiled here.
        planned_roles(config.actor_rollout_ref, tuple(settings.ROLE_STAGES))
        return _TaskRunner.run(self, config)


ProfiledTaskRunner = ray.remote(_ProfiledTaskRunner)
