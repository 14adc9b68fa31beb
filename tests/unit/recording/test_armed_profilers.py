"""torch_npu's own profilers armed from the environment (dynamic profiling, the msMonitor /
dynolog daemon, msprof, its OOM snapshots) are refused at start-up with the fix, exit 2, and
`show-config` refuses them alike: one profiler per process."""

import os

import pytest

from helpers.cli import run_cli
from helpers.npu import fake_npu  # noqa: F401 - a fixture
from mindspeed_prof import ProfilerConfig, profile
from mindspeed_prof.recording.armed import armed_profilers
from mindspeed_prof.errors import ConfigError
from mindspeed_prof.recording.startup import preflight

ON = ProfilerConfig(profile=True)
MEMORY = ProfilerConfig(profile=True, profile_memory_oom=True)


def found(env, config=ON, installed=True):
    return [a.variable for a in armed_profilers(config, env, installed=installed)]


def test_prof_config_path_naming_a_directory_arms_dynamic_profiling(tmp_path):
    assert found({"PROF_CONFIG_PATH": str(tmp_path)}) == [f"PROF_CONFIG_PATH={tmp_path}"]
    # torch_npu creates a missing directory itself: armed too
    assert found({"PROF_CONFIG_PATH": str(tmp_path / "new")}) == [f"PROF_CONFIG_PATH={tmp_path}/new"]


def test_prof_config_path_naming_a_file_arms_nothing(tmp_path):
    (tmp_path / "f.json").write_text("{}")  # torch_npu: "invalid ... profiler will not be enabled"

    assert found({"PROF_CONFIG_PATH": str(tmp_path / "f.json"), "MSMONITOR_USE_DAEMON": "1"}) == []


@pytest.mark.parametrize("env, armed", [
    ({"MSMONITOR_USE_DAEMON": "1"}, ["MSMONITOR_USE_DAEMON=1"]),
    ({"KINETO_USE_DAEMON": "1"}, ["KINETO_USE_DAEMON=1"]),
    ({"MSMONITOR_USE_DAEMON": "0", "KINETO_USE_DAEMON": "1"}, []),  # MSMONITOR wins, even as 0
    ({"MSMONITOR_USE_DAEMON": "yes"}, []),  # torch_npu: not valid, set to 0
    ({"MSMONITOR_USE_DAEMON": "2"}, []),
])
def test_the_daemon_switches_arm_as_torch_npu_reads_them(env, armed):
    assert found(env) == armed


def test_msprof_collecting_the_process_is_refused():
    assert found({"PROFILER_SAMPLECONFIG": "{...}"}) == ["PROFILER_SAMPLECONFIG={...}"]
    assert found({"PROFILING_MODE": "true"}) == ["PROFILING_MODE=true"]


def test_torch_npus_oom_snapshots_clash_only_with_our_memory_flags():
    assert found({"OOM_SNAPSHOT_ENABLE": "1"}) == []
    assert found({"OOM_SNAPSHOT_ENABLE": "1"}, MEMORY) == ["OOM_SNAPSHOT_ENABLE=1"]
    assert found({"OOM_SNAPSHOT_ENABLE": "0"}, MEMORY) == []


def test_nothing_is_refused_without_torch_npu_or_without_profile(tmp_path):
    env = {"PROF_CONFIG_PATH": str(tmp_path), "MSMONITOR_USE_DAEMON": "1"}

    assert found(env, installed=False) == []
    assert found(env, ProfilerConfig(profile=False)) == []


def test_megatrons_start_up_refuses_dynamic_profiling_with_the_fix(tmp_path, monkeypatch, fake_npu):
    monkeypatch.setenv("PROF_CONFIG_PATH", str(tmp_path))
    config = ProfilerConfig(profile=True, profile_save_path=str(tmp_path / "p"),
                            profile_backend="npu")

    with pytest.raises(ConfigError) as refused:
        preflight(config, rank=0, world_size=1)

    assert str(refused.value) == (
        f"PROF_CONFIG_PATH={tmp_path} arms torch_npu's dynamic profiling (started at `import "
        f"torch_npu`, stepped by every optimizer step); it cannot run beside mindspeed_prof's "
        f"profiler: two profilers in one process lose data or crash. Fix: unset "
        f"PROF_CONFIG_PATH for this job, or drop --profile and use torch_npu's dynamic profiling "
        f"alone.")


def test_a_plain_loop_is_refused_before_its_first_iteration(tmp_path, monkeypatch, fake_npu):
    monkeypatch.setenv("MSMONITOR_USE_DAEMON", "1")
    config = ProfilerConfig(profile=True, profile_step_start=2, profile_step_end=3,
                            profile_save_path=str(tmp_path / "p"), profile_backend="torch")

    with pytest.raises(ConfigError, match="MSMONITOR_USE_DAEMON=1 arms torch_npu's msMonitor"):
        with profile(config, train_iters=4, rank=0, world_size=1):
            pass


def test_show_config_refuses_an_armed_daemon_with_exit_2(capsys, monkeypatch, fake_npu):
    monkeypatch.setenv("KINETO_USE_DAEMON", "1")

    code, _, err = run_cli(capsys, "show-config", "--profile-backend", "npu")

    assert code == 2
    assert "KINETO_USE_DAEMON=1 arms torch_npu's msMonitor/dynolog client" in err
    assert "unset KINETO_USE_DAEMON for this job (or set it to 0)" in err
