"""mindspeed_prof in verl: each role of verl's colocated ActorRolloutRefWorker profiles itself.

    python -m mindspeed_prof.integrations.verl.main_ppo trainer.use_v1=false \\
        +actor_rollout_ref.mindspeed_prof=rl.yaml ...        # or MINDSPEED_PROF_CONFIG=rl.yaml

- ``worker.ProfiledActorRolloutRefWorker``: the drop-in worker (imports verl, checks its shape);
- ``runner.ProfiledTaskRunner``: verl's TaskRunner with that worker in the role map, for
  ``verl.trainer.main_ppo.run_ppo(config, task_runner_class=ProfiledTaskRunner)``;
- ``main_ppo``: verl's ``main_ppo`` command line with the ProfiledTaskRunner;
- ``settings``, ``steps``, ``shape``: the role YAML's sources, the RL step and the worker shape
  the integration knows, none of which imports verl.

Importing this package imports nothing of verl; the names above import it when first used.
"""

from .shape import TESTED_VERSIONS, UnknownVerlShape

__all__ = ["ProfiledActorRolloutRefWorker", "ProfiledTaskRunner", "TESTED_VERSIONS",
           "UnknownVerlShape"]


def __getattr__(name):
    if name == "ProfiledActorRolloutRefWorker":
        from .worker import ProfiledActorRolloutRefWorker

        return ProfiledActorRolloutRefWorker
    if name == "ProfiledTaskRunner":
        from .runner import ProfiledTaskRunner

        return ProfiledTaskRunner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
