"""Past one machine: per-node reports (check --node I/N --report) merge into the job's verdict
and summary, equal to what one machine says of the same folder."""

import json
import os
import subprocess
import sys

import pytest

from helpers.cli import run_cli, run_cli_json
from output_fixtures import corrupt, samples


def job(tmp_path, ranks=6):
    """A save path of ``ranks`` ranks: one corrupt, one expected by the manifests but absent,
    one capture whose rank nobody knows."""
    data = tmp_path / "save"
    for rank in range(ranks):
        samples.npu_capture(data, rank)
    samples.write_manifest(data, 0, selected_ranks=list(range(ranks + 1)))
    corrupt.truncate(os.path.join(samples.npu_capture(data, ranks + 3), samples.OUTPUT,
                                  "kernel_details.csv"))
    nameless = samples.npu_capture(data, ranks + 5, info="unranked")
    os.rename(nameless, data / "host_1_20230919172259000_ascend_pt")  # no rank in its name
    return data


def one_machine(capsys, data):
    return run_cli_json(capsys, "check", data)[1], run_cli_json(capsys, "summary", data)[1]


def merged(capsys, data, nodes, reports):
    for node in range(nodes):
        code, _, err = run_cli(capsys, "check", data, "--node", f"{node}/{nodes}", "--report",
                               reports / "node{node}.json")
        assert code in (0, 1), err
    code, result = run_cli_json(capsys, "merge", *sorted(reports.glob("node*.json")))
    return code, result


@pytest.mark.parametrize("nodes", [1, 2, 3, 4])
def test_merged_reports_equal_one_machines_verdicts_and_summary(tmp_path, capsys, nodes):
    data = job(tmp_path)
    check, summary = one_machine(capsys, data)
    code, result = merged(capsys, data, nodes, tmp_path / "reports")
    assert result["nodes"] == nodes
    assert result["check"] == check
    assert result["summary"] == summary
    assert code == check["exit_code"] == 1


def test_each_node_checks_only_its_contiguous_share_of_the_ranks(tmp_path, capsys):
    data = job(tmp_path, ranks=4)  # 0-4 expected, 0-3 and 7 found: 0 1 | 2 3 | 4 7
    code, report = run_cli_json(capsys, "check", data, "--node", "1/3")
    assert [r["rank"] for r in report["ranks"]] == [2, 3]
    assert report["unranked"] == []  # node 0 takes the captures of unknown rank
    assert report["expected_ranks"] == [0, 1, 2, 3, 4]  # what the job expects, unchanged
    _, first = run_cli_json(capsys, "check", data, "--node", "0/3")
    assert [r["rank"] for r in first["ranks"]] == [0, 1] and len(first["unranked"]) == 1


def test_a_node_report_that_never_came_leaves_its_ranks_missing(tmp_path, capsys):
    data = job(tmp_path, ranks=4)
    reports = tmp_path / "reports"
    for node in (0, 2):  # node 1 (ranks 2, 3) died
        run_cli(capsys, "check", data, "--node", f"{node}/3", "--report", reports / f"n{node}.json")
    code, result = run_cli_json(capsys, "merge", reports / "n0.json", reports / "n2.json")
    assert code == 1
    missing = {r["rank"]: r for r in result["check"]["ranks"] if r["verdict"] == "missing"}
    assert {2, 3} <= set(missing)
    assert "no node report covers it" in missing[2]["problems"][0]


def test_slow_ranks_are_measured_against_the_whole_jobs_median(tmp_path, capsys):
    data = job(tmp_path, ranks=4)
    _, summary = one_machine(capsys, data)
    _, result = merged(capsys, data, 4, tmp_path / "reports")
    assert result["summary"]["slow_ranks"] == summary["slow_ranks"]
    assert len({s["rank"] for s in summary["slow_ranks"]}) > 1  # across nodes, not within one


@pytest.mark.slow  # one process per node
def test_nodes_as_separate_processes_merge_to_the_single_machine_verdict(tmp_path, capsys):
    data = job(tmp_path, ranks=4)
    check, summary = one_machine(capsys, data)
    reports = tmp_path / "reports"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    nodes = [subprocess.Popen([sys.executable, "-m", "mindspeed_prof.cli", "check", str(data),
                               "--node", "auto", "--report", str(reports / "node{node}.json"),
                               "--json"],
                              env=dict(env, SLURM_PROCID=str(i), SLURM_NTASKS="3"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for i in range(3)]
    for node in nodes:
        assert node.wait(timeout=120) in (0, 1), node.stderr.read()
    assert sorted(p.name for p in reports.iterdir()) == ["node0.json", "node1.json",
                                                         "node2.json"]
    code, result = run_cli_json(capsys, "merge", *reports.iterdir())
    assert (result["check"], result["summary"]) == (check, summary)


@pytest.mark.parametrize("node, message", [
    ("3", "give I/N"), ("4/4", "0 <= I < N"), ("a/b", "integers"), ("auto", "SLURM_PROCID")])
def test_a_bad_node_is_a_usage_error_naming_the_fix(tmp_path, capsys, monkeypatch, node,
                                                    message):
    for name in ("SLURM_PROCID", "SLURM_NTASKS", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = run_cli(capsys, "check", tmp_path, "--node", node)
    assert code == 2 and message in err and "--node" in err


def test_merge_refuses_a_file_that_is_no_node_report(tmp_path, capsys):
    other = tmp_path / "check.json"
    samples.two_ranks(tmp_path / "save")
    other.write_text(json.dumps(run_cli_json(capsys, "check", tmp_path / "save")[1]))
    code, _, err = run_cli(capsys, "merge", other)
    assert code == 2 and "not a node report" in err and str(other) in err
    code, _, err = run_cli(capsys, "merge", tmp_path / "absent.json")
    assert code == 2 and "cannot be read" in err


def test_nodes_with_their_own_disks_report_the_ranks_they_hold(tmp_path, capsys):
    whole = job(tmp_path, ranks=4)  # 0-4 expected; 0-3 and 7 found, 7 corrupt
    check, _ = one_machine(capsys, whole)
    reports = tmp_path / "reports"
    for node, ranks in enumerate(([0, 1], [2, 3, 7])):
        local = tmp_path / f"disk{node}"
        local.mkdir()
        for rank in ranks:
            [capture] = whole.glob(f"rank{rank}_*")
            os.rename(capture, local / capture.name)
        (local / "profile_manifest_rank0.json").write_text(
            (whole / "profile_manifest_rank0.json").read_text())
        run_cli(capsys, "check", local, "--report", reports / f"node{node}.json")
    code, result = run_cli_json(capsys, "merge", *sorted(reports.iterdir()))
    verdicts = {r["rank"]: r["verdict"] for r in result["check"]["ranks"]}
    assert verdicts == {r["rank"]: r["verdict"] for r in check["ranks"]}
    assert verdicts[4] == "missing" and verdicts[7] == "corrupt" and code == 1
