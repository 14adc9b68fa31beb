import argparse

import pytest

from mindspeed_prof.arguments import add_profile_args, config_from_args, parse_profile_flags
from mindspeed_prof.errors import ConfigError


def megatron_parser():
    """The four profile flags exactly as Megatron <= 0.16 defines them."""
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-step-start", type=int, default=10)
    parser.add_argument("--profile-step-end", type=int, default=12)
    parser.add_argument("--profile-ranks", nargs="+", type=int, default=[0])
    return parser


def mindspeed_llm_parser():
    parser = megatron_parser()
    parser.add_argument("--profile-level", type=str, default="level0",
                        choices=["level_none", "level0", "level1", "level2"])
    parser.add_argument("--profile-save-path", type=str, default="./profile_dir")
    return parser


def test_flags_the_host_defines_are_reused_not_re_added():
    parser = add_profile_args(megatron_parser())
    assert parser._option_string_actions["--profile-ranks"].type is int
    args = parser.parse_args(["--profile", "--profile-analyse", "sync"])
    assert args.profile_ranks == [0] and args.profile_analyse == "sync"


def test_adding_twice_never_conflicts():
    parser = add_profile_args(add_profile_args(megatron_parser()))
    assert parser.parse_args([]).profile_level == "level0"


def test_host_choices_and_defaults_win():
    parser = add_profile_args(mindspeed_llm_parser())
    with pytest.raises(SystemExit):
        parser.parse_args(["--profile-level", "Level1"])  # MindSpeed-LLM's choices are lower case


def test_bare_parser_gets_every_flag_with_upstream_defaults():
    args = add_profile_args(argparse.ArgumentParser()).parse_args([])
    config = config_from_args(args, argv=[], environ={})
    assert (config.profile_step_start, config.profile_step_end, config.profile_ranks) == (10, 12, (0,))


def test_raw_rank_tokens_win_over_the_hosts_int_parse():
    parser = add_profile_args(megatron_parser())
    argv = ["--profile", "--profile-ranks", "0", "3"]
    config = config_from_args(parser.parse_args(argv), argv=argv + ["--profile-ranks", "0-3"], environ={})
    assert config.profile_ranks == (range(0, 4),)


def write(tmp_path, text):
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    return str(path)


def test_yaml_fills_what_the_command_line_did_not_set(tmp_path):
    path = write(tmp_path, "profile_step_start: 3\nprofile_step_end: 5\nprofile_level: Level1\n")
    config = parse_profile_flags(["--profile", "--profile-config", path, "--profile-step-end", "4"],
                                 environ={})
    assert (config.profile_step_start, config.profile_step_end, config.profile_level) == (3, 4, "level1")


def test_command_line_value_equal_to_default_still_wins_over_yaml(tmp_path):
    path = write(tmp_path, "profile_step_start: 3\n")
    config = parse_profile_flags(["--profile-config", path, "--profile-step-start", "10"], environ={})
    assert config.profile_step_start == 10


def test_unknown_yaml_key_suggests_the_closest(tmp_path):
    path = write(tmp_path, "profile_step_strat: 3\n")
    with pytest.raises(ConfigError, match="unknown key 'profile_step_strat'; did you mean 'profile_step_start'"):
        parse_profile_flags(["--profile-config", path], environ={})


def test_wrong_yaml_type_names_key_value_and_expectation(tmp_path):
    path = write(tmp_path, "profile_step_start: five\n")
    with pytest.raises(ConfigError, match="key profile_step_start has value 'five' .*expected an integer"):
        parse_profile_flags(["--profile-config", path], environ={})


def test_bad_yaml_syntax_gives_the_line(tmp_path):
    path = write(tmp_path, "profile_step_start: 3\nprofile_level: [level1\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        parse_profile_flags(["--profile-config", path], environ={})


def test_missing_yaml_file_names_the_flag(tmp_path):
    with pytest.raises(ConfigError, match="--profile-config .*nope.yaml: file not found"):
        parse_profile_flags(["--profile-config", str(tmp_path / "nope.yaml")], environ={})


def test_invalid_value_from_yaml_says_where_it_came_from(tmp_path):
    path = write(tmp_path, "profile_level: level7\n")
    with pytest.raises(ConfigError, match=r"--profile-level 'level7'.*\(value from --profile-config .*key profile_level\)"):
        parse_profile_flags(["--profile-config", path], environ={})


def test_environment_overrides_yaml_but_not_the_command_line(tmp_path):
    path = write(tmp_path, "profile_step_start: 3\nprofile_save_path: /from/yaml\n")
    environ = {"MINDSPEED_PROF_SAVE_PATH": "/from/env", "MINDSPEED_PROF_STEP_START": "4"}
    config = parse_profile_flags(["--profile-config", path, "--profile-step-start", "6"], environ=environ)
    assert (config.profile_save_path, config.profile_step_start) == ("/from/env", 6)


def test_unknown_environment_setting_is_refused():
    with pytest.raises(ConfigError, match="MINDSPEED_PROF_STEPSTART is not a mindspeed_prof setting"):
        parse_profile_flags([], environ={"MINDSPEED_PROF_STEPSTART": "3"})


def test_misspelled_flag_suggests_the_right_one():
    with pytest.raises(ConfigError, match="did you mean --profile-step-start"):
        parse_profile_flags(["--profile-step-strat", "3"], environ={})


def test_bad_int_value_names_the_flag():
    with pytest.raises(ConfigError, match="--profile-step-end: expected an integer"):
        parse_profile_flags(["--profile-step-end", "soon"], environ={})


def test_profile_config_can_come_from_its_environment_variable(tmp_path):
    path = write(tmp_path, "profile_step_start: 3\nprofile_step_end: 5\n")
    config = parse_profile_flags([], environ={"MINDSPEED_PROF_CONFIG": path})
    assert (config.profile_config, config.profile_step_start, config.profile_step_end) == (path, 3, 5)


def test_every_flag_has_an_environment_variable_that_is_accepted(tmp_path):
    # README: "Every flag is also ... an environment variable MINDSPEED_PROF_<NAME>".
    from mindspeed_prof.config.profiler_config import KNOBS
    path = write(tmp_path, "")
    for knob in KNOBS:
        name = "MINDSPEED_PROF_" + ("PROFILE" if knob == "profile" else knob[len("profile_"):].upper())
        value = {"profile_config": path}.get(knob, "1")
        try:
            parse_profile_flags([], environ={name: value})
        except ConfigError as exc:  # "1" is no level name: refused as a value, not as a variable
            assert "not a mindspeed_prof setting" not in str(exc), (name, str(exc))
            assert "unknown key" not in str(exc), (name, str(exc))


def test_profile_config_on_the_command_line_wins_over_the_variable(tmp_path):
    from_env = write(tmp_path, "profile_step_start: 3\n")
    typed = tmp_path / "typed.yaml"
    typed.write_text("profile_step_start: 7\nprofile_step_end: 9\n")
    config = parse_profile_flags(["--profile-config", str(typed)],
                                 environ={"MINDSPEED_PROF_CONFIG": from_env})
    assert (config.profile_config, config.profile_step_start) == (str(typed), 7)


def test_other_variables_win_over_the_file_named_by_the_variable(tmp_path):
    path = write(tmp_path, "profile_step_start: 3\nprofile_step_end: 5\n")
    config = parse_profile_flags([], environ={"MINDSPEED_PROF_CONFIG": path,
                                              "MINDSPEED_PROF_STEP_END": "6"})
    assert (config.profile_step_start, config.profile_step_end) == (3, 6)


@pytest.mark.parametrize("value, message", [
    ("/nowhere/p.yaml", "MINDSPEED_PROF_CONFIG /nowhere/p.yaml: file not found"),
    ("", "environment variable MINDSPEED_PROF_CONFIG is empty"),
])
def test_a_bad_config_variable_names_the_variable(value, message):
    with pytest.raises(ConfigError, match=message):
        parse_profile_flags([], environ={"MINDSPEED_PROF_CONFIG": value})


def test_a_bad_value_in_the_variables_file_names_the_variable_and_the_key(tmp_path):
    path = write(tmp_path, "profile_step_start: 0\n")
    with pytest.raises(ConfigError, match=r"\(value from MINDSPEED_PROF_CONFIG .*key profile_step_start\)"):
        parse_profile_flags([], environ={"MINDSPEED_PROF_CONFIG": path})


@pytest.mark.parametrize("value", ["nan", ".nan", ".inf", "inf", "-.inf"])
def test_a_non_finite_budget_in_the_environment_is_refused(value):
    # YAML reads .nan/.inf as floats ("nan" stays text, refused as not a number)
    with pytest.raises(ConfigError, match=r"MINDSPEED_PROF_MAX_GB|--profile-max-gb .* environment"):
        parse_profile_flags([], environ={"MINDSPEED_PROF_MAX_GB": value})


@pytest.mark.parametrize("value", ["", " ", ","])
def test_an_empty_ranks_variable_is_refused_as_naming_no_rank(value):
    with pytest.raises(ConfigError, match=r"^--profile-ranks .* names no rank.*value from environment"):
        parse_profile_flags([], environ={"MINDSPEED_PROF_RANKS": value})
