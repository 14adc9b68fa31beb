"""Pytest fixtures for harness runs; import the ones you use into your test module."""

import pytest

from harness import launch


@pytest.fixture
def run_megatron(tmp_path):
    """``run_megatron(args, nproc=2, **env_overrides)``: one stand-in training in ``tmp_path``."""

    def run(args=(), *, nproc=2, timeout=240, launcher_prefix=(), **env_overrides):
        env = launch.harness_env(tmp_path, **env_overrides)
        return launch.run_training(args, env=env, cwd=tmp_path, nproc=nproc, timeout=timeout,
                                   launcher_prefix=launcher_prefix)

    return run

@pytest.fixture
def run_launch_script(tmp_path):
    """``run_launch_script(args, nproc=2, script=..., **env_overrides)`` for bash launch scripts."""

    def run(args=(), *, nproc=2, timeout=240, script=launch.LAUNCH_SCRIPT, **env_overrides):
        env = launch.harness_env(tmp_path, **env_overrides)
        return launch.run_script(script, args, env=env, cwd=tmp_path, nproc=nproc, timeout=timeout)

    return run
