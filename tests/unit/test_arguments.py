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
    assert config.profile_ranks == (0, 1, 2, 3)


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
