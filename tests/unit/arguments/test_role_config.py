"""A role's configuration: top-level defaults, its own block, and errors that name the fix."""

import pytest

from mindspeed_prof.arguments.roles import role_config
from mindspeed_prof.config.profiler_config import ProfilerConfig
from mindspeed_prof.errors import ConfigError

ISSUE_YAML = """\
profile: true
profile_save_path: {save}
roles:
  actor:   {{profile_steps: "10-11", profile_ranks: "0", profile_stages: [old_logprob, update]}}
  ref:     {{profile_steps: "10"}}
  rollout: {{profile_steps: "10", profile_level: level1}}
"""


@pytest.fixture
def rl_yaml(tmp_path):
    path = tmp_path / "rl.yaml"
    path.write_text(ISSUE_YAML.format(save=tmp_path / "prof"))
    return str(path)


def test_role_block_overrides_the_top_level_defaults(rl_yaml, tmp_path):
    actor = role_config("actor", rl_yaml, environ={})
    assert actor.profile is True
    assert actor.profile_save_path == str(tmp_path / "prof")
    assert actor.profile_steps == ((10, 11),)
    assert actor.profile_ranks == (0,)
    assert actor.profile_stages == ("old_logprob", "update")


def test_each_role_gets_only_its_own_block(rl_yaml):
    rollout = role_config("rollout", rl_yaml, environ={})
    ref = role_config("ref", rl_yaml, environ={})
    assert rollout.profile_level == "level1" and ref.profile_level == "level0"
    assert ref.profile_stages == () and ref.profile_steps == ((10, 10),)


def test_a_typo_in_another_roles_block_does_not_stop_this_role(tmp_path):
    path = tmp_path / "rl.yaml"
    path.write_text("profile: true\nroles:\n  actor: {profile_steps: '2'}\n"
                    "  ref: {profile_stepz: '2'}\n")
    assert role_config("actor", str(path), environ={}).profile_steps == ((2, 2),)
    with pytest.raises(ConfigError, match=r"roles\.ref: unknown key 'profile_stepz'; did you "
                                          r"mean 'profile_steps'"):
        role_config("ref", str(path), environ={})


def test_unknown_role_is_named_with_the_closest_listed_role(rl_yaml):
    with pytest.raises(ConfigError) as caught:
        role_config("actr", rl_yaml, environ={})
    message = str(caught.value)
    assert "unknown role 'actr'" in message and "did you mean 'actor'?" in message
    assert "actor, ref, rollout" in message and rl_yaml in message


def test_without_a_roles_mapping_every_role_takes_the_top_level():
    config = role_config("critic", {"profile": True, "profile_steps": "3"}, environ={})
    assert config.profile and config.profile_steps == ((3, 3),)


def test_a_role_listed_with_an_empty_block_takes_the_defaults():
    config = role_config("reward", {"profile": True, "roles": {"reward": None}}, environ={})
    assert config.profile is True and config.profile_stages == ()


def test_environment_overrides_the_role_block(rl_yaml):
    config = role_config("ref", rl_yaml, environ={"MINDSPEED_PROF_STEPS": "12-13"})
    assert config.profile_steps == ((12, 13),)


def test_bad_value_in_a_role_block_names_the_block_and_the_key(tmp_path):
    path = tmp_path / "rl.yaml"
    path.write_text("roles:\n  actor: {profile_level: level7}\n")
    with pytest.raises(ConfigError) as caught:
        role_config("actor", str(path), environ={})
    assert "--profile-level 'level7'" in str(caught.value)
    assert "roles.actor" in str(caught.value) and "key profile_level" in str(caught.value)


def test_roles_must_be_a_mapping():
    with pytest.raises(ConfigError, match="'roles' must map role names"):
        role_config("actor", {"roles": ["actor"]}, environ={})


def test_a_stage_name_that_cannot_be_a_folder_is_refused():
    with pytest.raises(ConfigError, match="--profile-stages 'up/date' is not a stage name"):
        role_config("actor", {"profile_stages": ["up/date"]}, environ={})


def test_a_role_name_that_cannot_be_a_folder_is_refused():
    with pytest.raises(ConfigError, match="role '../x' cannot name a folder"):
        role_config("../x", {}, environ={})


def test_a_ready_profiler_config_is_used_as_it_is():
    config = ProfilerConfig(profile=True, profile_stages="update")
    assert role_config("actor", config, environ={"MINDSPEED_PROF_STEPS": "9"}) is config


def test_a_missing_role_file_is_named():
    with pytest.raises(ConfigError, match="role config /no/rl.yaml: file not found"):
        role_config("actor", "/no/rl.yaml", environ={})


def test_without_config_the_role_yaml_named_by_mindspeed_prof_config_is_read(rl_yaml):
    config = role_config("rollout", None, environ={"MINDSPEED_PROF_CONFIG": rl_yaml})
    assert config.profile_level == "level1"
    with pytest.raises(ConfigError, match=r"MINDSPEED_PROF_CONFIG=.*rl.yaml: unknown role 'critic'"):
        role_config("critic", None, environ={"MINDSPEED_PROF_CONFIG": rl_yaml})


def test_a_role_yaml_given_to_training_says_roles_is_for_role_profiler(rl_yaml):
    from mindspeed_prof.arguments import parse_profile_flags

    with pytest.raises(ConfigError, match="'roles' is an RL role YAML's key, read by "
                                          "mindspeed_prof.role_profiler"):
        parse_profile_flags(["--profile", "--profile-config", rl_yaml], environ={})
