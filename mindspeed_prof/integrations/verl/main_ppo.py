"""``python -m mindspeed_prof.integrations.verl.main_ppo [hydra overrides]``: verl's own
``verl.trainer.main_ppo`` command line (same config, same overrides) with the profiled worker in
the role map. verl's ``main`` picks its TaskRunner itself, so this entry does what it does
around it, with verl's functions, and hands ``run_ppo`` the ProfiledTaskRunner.
"""

import sys

import hydra

from mindspeed_prof import log
from mindspeed_prof.errors import ConfigError

from .shape import UnknownVerlShape


@hydra.main(config_path="pkg://verl.trainer.config", config_name="ppo_trainer", version_base=None)
def main(config):
    try:
        _run(config)
    except (ConfigError, UnknownVerlShape) as exc:
        # hydra reports an exception as a traceback and exit code 1; a usage error is one line
        # and exit code 2. The TaskRunner's ConfigError arrives as Ray's RayTaskError, which is
        # also a ConfigError and keeps the original as ``cause``. An unknown verl fails here,
        # in the driver, when the runner is imported.
        cause = getattr(exc, "cause", None)
        log.error(str(cause if isinstance(cause, (ConfigError, UnknownVerlShape)) else exc))
        sys.exit(2)


def _run(config):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    from .runner import VERL_RUNNER, ProfiledTaskRunner

    if config.trainer.use_v1:
        raise ConfigError("trainer.use_v1=true runs verl's v1 trainer (TaskRunnerV1, "
                          "TransferQueue), which mindspeed_prof's verl integration is not tested "
                          "on; add trainer.use_v1=false (verl's RayPPOTrainer.fit).")
    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config),
                    use_critic=need_critic(config))
    VERL_RUNNER.run_ppo(config, task_runner_class=ProfiledTaskRunner)


if __name__ == "__main__":
    main()
