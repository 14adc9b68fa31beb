"""check and summary on the RL role layout: verdicts per (role, rank), the cross-role table."""

import os

import pytest

from helpers.cli import run_cli, run_cli_json
from helpers.traces import torch_traces
from helpers.role_runs import profile_role


def test_check_names_the_role_and_rank_whose_output_is_missing(tmp_path, capsys):
    save = tmp_path / "prof"
    for rank in (0, 1):
        profile_role(save, "rollout", rank)
    profile_role(save, "actor", 0, stages=("update",), profile_stages=["update"])
    for trace in torch_traces(str(save / "rollout")):
        if os.path.basename(trace).startswith("rank1."):
            os.remove(trace)
    capsys.readouterr()
    code, report = run_cli_json(capsys, "check", save)
    assert code == 1
    assert report["expected_ranks"] == {"actor": [0, 1], "rollout": [0, 1]}
    verdicts = {(r["role"], r["rank"]): r["verdict"] for r in report["ranks"]}
    assert verdicts[("rollout", 0)] == "valid" and verdicts[("actor", 0)] == "valid"
    assert verdicts[("rollout", 1)] == "missing"  # its trace was deleted
    assert verdicts[("actor", 1)] == "missing"  # selected, never ran
    code, out, _ = run_cli(capsys, "check", save)
    assert code == 1 and "rollout  1     missing" in out and "actor    1     missing" in out


def test_summary_shows_each_roles_slowest_rank_and_its_stage_times(tmp_path, capsys):
    save = tmp_path / "prof"
    profile_role(save, "rollout", 0, stages=("sync_weights", "generate"))
    profile_role(save, "rollout", 1, stages=("sync_weights", "generate"), slow_s=0.05)
    capsys.readouterr()
    code, report = run_cli_json(capsys, "summary", save)
    assert code == 0
    [step] = report["rl_steps"]
    [row] = step["roles"]
    assert step["step"] == 2 and row["role"] == "rollout" and row["ranks"] == [0, 1]
    assert row["slowest_rank"] == 1 and row["measured"] == "step"
    assert row["stages_us"]["generate"] >= 50_000 and row["step_us"] >= 100_000
    code, csv_text, _ = run_cli(capsys, "summary", save, "--csv")
    assert "2,rollout,1,generate," in csv_text


def test_captures_outside_every_role_folder_are_named(tmp_path, capsys):
    save = tmp_path / "prof"
    profile_role(save, "ref", 0)
    profile_role(save, "ref", 1)
    stray = save / "rank0.123.pt.trace.json"
    stray.write_text('{"traceEvents": []}')
    capsys.readouterr()
    code, report = run_cli_json(capsys, "check", save)
    assert code == 0
    assert any("rank0.123.pt.trace.json lies outside every role folder" in w
               for w in report["warnings"])


def test_summary_of_one_roles_folder_gives_its_per_rank_breakdown_and_operators(tmp_path, capsys):
    save = tmp_path / "prof"
    profile_role(save, "rollout", 0, stages=("sync_weights", "generate"))
    profile_role(save, "ref", 0)
    capsys.readouterr()
    code, out, _ = run_cli(capsys, "summary", save)
    assert code == 0 and f"mindspeed-prof summary {save / 'rollout'}" in out
    code, report = run_cli_json(capsys, "summary", save / "rollout")
    assert code == 0 and [r["rank"] for r in report["ranks"]] == [0]
    assert any(op["name"] == "aten::randn" for op in report["ranks"][0]["top_ops"])


def test_plot_of_rl_role_output_is_refused_naming_a_roles_folder_and_one_of_those_plots(
        tmp_path, capsys):
    # before: nothing written, exit 0
    save = tmp_path / "prof"
    profile_role(save, "rollout", 0)
    profile_role(save, "ref", 0)
    capsys.readouterr()
    target = tmp_path / "steps.png"
    code, _, err = run_cli(capsys, "summary", save, "--plot", target)
    assert code == 2 and not target.exists()
    assert "holds RL role output" in err and "ref, rollout" in err
    assert f"mindspeed-prof summary {save / 'ref'} --plot {target}" in err
    code, _, err = run_cli(capsys, "summary", save, "--run", "x")
    assert code == 2 and "--run x" in err
    pytest.importorskip("matplotlib")
    code, out, _ = run_cli(capsys, "summary", save / "ref", "--plot", target)
    assert code == 0 and target.stat().st_size > 0 and f"plot written to {target}" in out
