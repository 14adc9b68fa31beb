import dataclasses

import pytest

from mindspeed_prof.config.profiler_config import KNOBS, ProfilerConfig, flag_name
from mindspeed_prof.errors import ConfigError


def test_defaults_match_megatron_and_mindspeed_llm():
    config = ProfilerConfig()
    assert (config.profile, config.profile_step_start, config.profile_step_end) == (False, 10, 12)
    assert config.profile_ranks == (0,)
    assert config.profile_level == "level0"
    assert config.profile_export_type == "text"
    assert config.profile_save_path == "./profile_dir"
    assert config.profile_data_simplification is False


@pytest.mark.parametrize("spelling", ["level1", "Level1", "LEVEL1"])
def test_level_accepts_every_spelling(spelling):
    assert ProfilerConfig(profile_level=spelling).profile_level == "level1"


def test_level_none_accepts_torch_npu_spelling():
    assert ProfilerConfig(profile_level="Level_none").profile_level == "level_none"


@pytest.mark.parametrize("spelling", ["PipeUtilization", "pipeutilization",
                                      "ACL_AICORE_PIPE_UTILIZATION", "acl_aicore_pipe_utilization"])
def test_aic_metrics_accepts_attribute_and_acl_names(spelling):
    assert ProfilerConfig(profile_aic_metrics=spelling).profile_aic_metrics == "PipeUtilization"


def test_unknown_level_names_the_flag_and_the_choices():
    with pytest.raises(ConfigError, match=r"--profile-level 'level9'.*level_none, level0"):
        ProfilerConfig(profile_level="level9")


def test_end_before_start_names_both_flags_and_the_fix():
    with pytest.raises(ConfigError) as info:
        ProfilerConfig(profile=True, profile_step_start=10, profile_step_end=5)
    assert "--profile-step-end 5 must be > --profile-step-start 10; use -1" in str(info.value)


def test_end_minus_one_means_until_training_ends():
    assert ProfilerConfig(profile_step_start=3, profile_step_end=-1).profile_step_end == -1


def test_start_zero_is_refused():
    with pytest.raises(ConfigError, match="--profile-step-start 0 must be >= 1"):
        ProfilerConfig(profile=True, profile_step_start=0)


def test_wrong_type_names_the_flag_and_what_is_expected():
    with pytest.raises(ConfigError, match="--profile-step-start '5' has the wrong type: expected an integer"):
        ProfilerConfig(profile_step_start="5")


def test_stale_window_flags_without_profile_are_not_refused():
    # A launch script keeps its window flags while --profile is switched off: nothing is planned
    # from them, so nothing is wrong (torchtitan validates its schedule only when profiling).
    config = ProfilerConfig(profile=False, profile_step_start=20, profile_step_end=10,
                            profile_every=2, profile_steps="30-31")
    assert (config.profile_step_start, config.profile_step_end, config.profile_every) == (20, 10, 2)
    with pytest.raises(ConfigError, match="--profile-step-end 10 must be > --profile-step-start 20"):
        config.replace(profile=True)


def test_stale_window_flags_do_not_hide_a_mistyped_value():
    with pytest.raises(ConfigError, match="--profile-level 'level9' is not one of"):
        ProfilerConfig(profile=False, profile_level="level9")


def test_a_bare_number_is_a_one_step_window_in_yaml_and_the_environment(tmp_path):
    from mindspeed_prof.arguments import parse_profile_flags
    path = tmp_path / "p.yaml"
    path.write_text("profile_steps: 4\n")
    assert parse_profile_flags(["--profile-config", str(path)]).profile_steps == ((4, 4),)
    assert parse_profile_flags([], environ={"MINDSPEED_PROF_STEPS": "4"}).profile_steps == ((4, 4),)
    assert parse_profile_flags(["--profile-steps", "4"]).profile_steps == ((4, 4),)


def test_a_mistyped_environment_variable_gets_the_closest_name():
    from mindspeed_prof.arguments import parse_profile_flags
    with pytest.raises(ConfigError, match="MINDSPEED_PROF_STEP_STRAT is not a mindspeed_prof "
                                          "setting; did you mean MINDSPEED_PROF_STEP_START"):
        parse_profile_flags([], environ={"MINDSPEED_PROF_STEP_STRAT": "5"})


def test_config_is_immutable_and_replace_revalidates():
    config = ProfilerConfig(profile=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.profile = True
    with pytest.raises(ConfigError):
        config.replace(profile_step_end=3)


def test_export_type_combination_is_canonical():
    assert ProfilerConfig(profile_export_type="DB,text").profile_export_type == "text,db"


def test_host_sys_accepts_commas_and_refuses_unknown_names():
    assert ProfilerConfig(profile_host_sys=("cpu,mem", "disk")).profile_host_sys == ("cpu", "mem", "disk")
    with pytest.raises(ConfigError, match="--profile-host-sys 'gpu'"):
        ProfilerConfig(profile_host_sys=("gpu",))


def test_aic_metrics_at_level0_produces_a_warning_naming_both_flags():
    notes = ProfilerConfig(profile_aic_metrics="PipeUtilization").warnings()
    assert any("--profile-aic-metrics PipeUtilization is ignored at --profile-level level0" in n
               for n in notes)


def test_op_attr_without_db_export_is_warned():
    assert any("--profile-op-attr" in n for n in ProfilerConfig(profile_op_attr=True).warnings())


def test_profile_stages_outside_rl_roles_is_warned_in_the_training_manifest(tmp_path):
    import json

    import torch

    from mindspeed_prof import profile

    config = ProfilerConfig(profile=True, profile_save_path=str(tmp_path), profile_backend="torch",
                            profile_step_start=1, profile_step_end=2, profile_stages="update")
    with profile(config, rank=0, world_size=1, train_iters=2) as prof:
        for _ in range(2):
            torch.randn(4, 4).sum()
            prof.step()
    with open(tmp_path / "profile_manifest_rank0.json") as handle:
        messages = [w["message"] for w in json.load(handle)["warnings"]]
    assert any(m.startswith("--profile-stages update applies only to RL roles") for m in messages)
    assert not any("--profile-stages" in n
                   for n in ProfilerConfig(profile_stages="update").warnings(role_driver=True))


def test_every_field_has_a_flag_name_and_help():
    for name, spec in KNOBS.items():
        assert name.startswith("profile")
        assert flag_name(name).startswith("--profile")
        assert spec.metadata["help"]


@pytest.mark.parametrize("knob", ["profile_max_gb", "profile_gc_detect_threshold"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_number_is_refused_naming_the_flag(knob, value):
    # nan passes every "<= 0" check: the budget would silently be off
    with pytest.raises(ConfigError, match=f"^{flag_name(knob)} -?(nan|inf) is not a finite number"):
        ProfilerConfig(profile=True, **{knob: value})


@pytest.mark.parametrize("spelling", [".nan", ".inf", ".NaN", "-.inf"])
def test_yaml_nan_and_inf_budgets_are_refused_naming_the_file(tmp_path, spelling):
    from mindspeed_prof.arguments import parse_profile_flags
    path = tmp_path / "p.yaml"
    path.write_text(f"profile_max_gb: {spelling}\n")
    with pytest.raises(ConfigError) as info:
        parse_profile_flags(["--profile-config", str(path)])
    assert "is not a finite number" in str(info.value)
    assert f"value from --profile-config {path}, key profile_max_gb" in str(info.value)


@pytest.mark.parametrize("typed", [["--profile-ranks", ""], ["--profile-ranks", ","],
                                   ["--profile-ranks=", "--profile-level", "level1"]])
def test_an_empty_rank_list_on_the_command_line_is_a_usage_error(typed):
    from mindspeed_prof.arguments import parse_profile_flags
    with pytest.raises(ConfigError, match="^--profile-ranks .* names no rank"):
        parse_profile_flags(typed)


@pytest.mark.parametrize("text", ["profile_ranks: []", "profile_ranks: ''", "profile_ranks: ','"])
def test_an_empty_rank_list_in_yaml_is_a_usage_error(tmp_path, text):
    from mindspeed_prof.arguments import parse_profile_flags
    path = tmp_path / "p.yaml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError, match="^--profile-ranks .* names no rank.*key profile_ranks"):
        parse_profile_flags(["--profile-config", str(path)])


@pytest.mark.parametrize("typed, message", [
    (["--profile-steps", ""], "--profile-steps '' names no window"),
    (["--profile-steps=,"], "--profile-steps ',' names no window"),
    (["--profile-config", ""], "--profile-config is empty"),
    (["--profile-config= "], "--profile-config is empty"),
])
def test_an_empty_steps_or_config_value_is_a_usage_error_not_the_default(typed, message):
    from mindspeed_prof.arguments import parse_profile_flags
    with pytest.raises(ConfigError, match=message):
        parse_profile_flags(typed)


def test_an_empty_steps_list_in_yaml_is_a_usage_error(tmp_path):
    from mindspeed_prof.arguments import parse_profile_flags
    path = tmp_path / "p.yaml"
    path.write_text("profile_steps: []\n")
    with pytest.raises(ConfigError, match="^--profile-steps \\[\\] names no window.*key profile_steps"):
        parse_profile_flags(["--profile-config", str(path)])


def test_leaving_steps_out_keeps_the_start_end_window():
    from mindspeed_prof.arguments import parse_profile_flags
    assert parse_profile_flags([]).profile_steps == ()
    assert ProfilerConfig(profile_steps=None).profile_steps == ()
