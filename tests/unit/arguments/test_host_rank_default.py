"""An untyped --profile-ranks keeps the host parser's default with the host's meaning (Megatron-LM
<= 0.16: [0] = rank 0; >= 0.17: [] = every rank), while a list the user wrote empty stays a
usage error; show-config says which default applied and why."""

import argparse
import json

import pytest

from mindspeed_prof.arguments import add_profile_args, config_and_notes
from mindspeed_prof.cli import main
from mindspeed_prof.errors import ConfigError


def megatron_parser(release):
    """Megatron's profiling flags as ProfilingConfig builds them: [0] up to 0.16, [] from 0.17."""
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-step-start", type=int, default=10)
    parser.add_argument("--profile-step-end", type=int, default=12)
    parser.add_argument("--profile-ranks", nargs="+", type=int,
                        default=[] if release >= (0, 17) else [0])
    return add_profile_args(parser)


def resolve(release, argv, environ=None):
    args = megatron_parser(release).parse_args(argv)
    return config_and_notes(args, argv=argv, environ=environ or {})


def test_megatron_0_17_default_empty_list_means_every_rank():
    config, notes = resolve((0, 19), ["--profile"])
    assert config.profile_ranks == ()
    assert any("Megatron's own default [] applies" in n and "every rank" in n for n in notes)


def test_megatron_0_16_default_means_rank_0():
    config, notes = resolve((0, 16), ["--profile"])
    assert config.profile_ranks == (0,)
    assert any("default [0] applies, rank 0 only" in n for n in notes)


def test_a_typed_rank_list_wins_and_no_default_is_reported():
    config, notes = resolve((0, 19), ["--profile", "--profile-ranks", "1"])
    assert config.profile_ranks == (1,) and notes == []


@pytest.mark.parametrize("release", [(0, 16), (0, 19)])
def test_a_ranks_variable_set_empty_is_still_refused_on_every_release(release):
    with pytest.raises(ConfigError, match=r"names no rank.*value from environment"):
        resolve(release, ["--profile"], environ={"MINDSPEED_PROF_RANKS": ""})


@pytest.mark.parametrize("release", [(0, 16), (0, 19)])
def test_a_yaml_empty_rank_list_is_still_refused(release, tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("profile_ranks: []\n")
    with pytest.raises(ConfigError, match=r"names no rank"):
        resolve(release, ["--profile", "--profile-config", str(path)])


def test_an_empty_typed_rank_token_is_refused_not_read_as_the_default():
    # `--profile-ranks "$RANKS"` with RANKS unset: the raw token is '', which names no rank.
    args = megatron_parser((0, 19)).parse_args(["--profile"])
    with pytest.raises(ConfigError, match=r"--profile-ranks '' names no rank"):
        config_and_notes(args, argv=["--profile", "--profile-ranks", ""], environ={})


def test_a_ranks_variable_wins_over_the_hosts_default():
    config, notes = resolve((0, 19), ["--profile"], environ={"MINDSPEED_PROF_RANKS": "0"})
    assert config.profile_ranks == (0,) and notes == []


def show_config(capsys, *argv):
    code = main(["show-config", "--json", "--world-size", "2", *argv])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_show_config_emulates_megatron_0_19_every_rank_and_says_why(capsys):
    report = show_config(capsys, "--megatron-version", "0.19.0")
    assert report["ranks"]["selected"] == [0, 1]
    assert any("Megatron's own default []" in n and "Megatron-LM 0.19.0, from --megatron-version"
               in n for n in report["notes"])


def test_show_config_emulates_megatron_0_16_rank_0(capsys):
    report = show_config(capsys, "--megatron-version", "0.16.1")
    assert report["ranks"]["selected"] == [0]
    assert any("default [0] applies, rank 0 only" in n for n in report["notes"])


def test_show_config_with_typed_ranks_reports_no_default(capsys):
    report = show_config(capsys, "--megatron-version", "0.19.0", "--profile-ranks", "1")
    assert report["ranks"]["selected"] == [1]
    assert not any("--profile-ranks not given" in n for n in report["notes"])


def test_show_config_refuses_a_version_that_is_no_release(capsys):
    assert main(["show-config", "--megatron-version", "latest"]) == 2
    assert "--megatron-version 'latest' is not a release number" in capsys.readouterr().err
