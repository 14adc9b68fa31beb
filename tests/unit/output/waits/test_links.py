"""The rank-pair communication matrix of NPU captures (communication_matrix.json): per group,
each link's bandwidth, and the links well below their peers' of the same transport and size
class flagged, in summary --json and the report's communication section."""

import json
import os

import pytest

from helpers.cli import assert_merge_refuses, run_cli, run_cli_json
from mindspeed_prof.layout import ASCEND_OUTPUT_DIR
from output_fixtures import samples

GROUP = "9350434047717501483"  # the sample job's 8-rank HCCS group


def _matrix_file(capture):
    return os.path.join(capture, ASCEND_OUTPUT_DIR, "communication_matrix.json")


def _edit(capture, change):
    path = _matrix_file(capture)
    with open(path) as handle:
        data = json.load(handle)
    change(data)
    with open(path, "w") as handle:
        json.dump(data, handle)  # NaN stays NaN, as a careless writer leaves it


def _ops(data):
    for kinds in data.values():
        for ops in kinds.values():
            for name, links in ops.items():
                if name != "Total Op Info" and name.endswith("@" + GROUP):
                    yield links


def _html(capsys, directory, tmp_path):
    out = str(tmp_path / "report.html")
    code, _, _ = run_cli(capsys, "report", directory, "-o", out)
    assert code == 0
    with open(out, encoding="utf-8") as handle:
        return handle.read()


def test_the_real_samples_give_each_groups_links_with_their_bandwidth_and_flag_none(
        tmp_path, capsys):
    samples.two_ranks(tmp_path)
    code, data = run_cli_json(capsys, "summary", tmp_path)
    assert code == 0
    matrix = data["communication_matrix"]
    assert matrix["captures"] == 2 and matrix["unreadable"] == 0
    group = next(g for g in matrix["groups"] if g["raw_group"] == GROUP)
    # HCCL numbers the group's own ranks: rank 0's file holds 0 -> 1..7, rank 1's 1 -> 0, 2..7
    assert group["size"] == 8 and group["captures"] == 2
    links = {(p["src"], p["dst"]): p for p in group["pairs"]}
    assert {(0, d) for d in range(1, 8)} | {(1, d) for d in range(8) if d != 1} <= set(links)
    assert links[(0, 1)]["transports"] == ["HCCS"]
    # the sample's 20 MB all-gathers run at ~19 GB/s over HCCS, and no link is half its peers
    assert 15.0 < links[(0, 1)]["bandwidth_gbps"] < 25.0
    assert matrix["slow_links"] == [] and matrix["slow_groups"] == []
    page = _html(capsys, str(tmp_path), tmp_path)
    assert "Links (communication_matrix.json)" in page and "slow links: none" in page
    assert f"Bandwidth per link, hccl:{GROUP}" in page


def test_a_link_at_a_quarter_of_its_peers_bandwidth_is_flagged_in_summary_and_report(
        tmp_path, capsys):
    rank0, _ = samples.two_ranks(tmp_path)

    def slow_0_to_3(data):
        for links in _ops(data):
            if "0-3" in links:
                links["0-3"]["Transit Time(ms)"] *= 4  # the same bytes in four times as long

    _edit(rank0, slow_0_to_3)
    _, data = run_cli_json(capsys, "summary", tmp_path)
    matrix = data["communication_matrix"]
    [slow] = matrix["slow_links"]
    assert (slow["raw_group"], slow["src"], slow["dst"], slow["transport"],
            slow["size_class"]) == (GROUP, 0, 3, "HCCS", "10-100 MB")
    assert slow["ratio"] == pytest.approx(0.25, abs=0.02) and slow["peers"] == 14
    group = next(g for g in matrix["groups"] if g["raw_group"] == GROUP)
    assert [(p["src"], p["dst"]) for p in group["pairs"] if p["slow"]] == [(0, 3)]
    page = _html(capsys, str(tmp_path), tmp_path)
    assert "<table class='slow-links'>" in page and "0 → 3" in page and "SLOW" in page


def test_a_nan_size_in_the_matrix_is_left_out_counted_and_said(tmp_path, capsys):
    rank0, _ = samples.two_ranks(tmp_path)

    def nan_size(data):
        next(_ops(data))["0-0"]["Transit Size(MB)"] = float("nan")

    _edit(rank0, nan_size)
    with open(_matrix_file(rank0)) as handle:
        assert "NaN" in handle.read()
    code, out, _ = run_cli(capsys, "summary", str(tmp_path), "--json")
    assert code == 0 and "NaN" not in out  # strict JSON
    matrix = json.loads(out)["communication_matrix"]
    assert matrix["unreadable"] == 1
    assert any("no finite number: left out" in n for n in matrix["notes"])


def _links_of(rank, size, slow):
    """A rank's communication_matrix.json in one 4-rank group: 64 MB to every peer per
    all-reduce, at 20 GB/s over HCCS, or at 5 GB/s on the ``slow`` link."""
    links = {f"{rank}-{rank}": {"Transport Type": "LOCAL", "Transit Size(MB)": 64.0,
                                "Transit Time(ms)": 0.1, "Bandwidth(GB/s)": 640.0}}
    for peer in range(size):
        if peer != rank:
            ms = 12.8 if (rank, peer) == slow else 3.2
            links[f"{rank}-{peer}"] = {"Transport Type": "HCCS", "Transit Size(MB)": 64.0,
                                       "Transit Time(ms)": ms, "Bandwidth(GB/s)": 64.0 / ms}
    ops = {f"hcom_allReduce__777_{i}@777": links for i in range(3)}
    return {"step1": {"collective": {**ops, "Total Op Info": links}}}


def test_a_slow_link_of_a_group_every_member_recorded_is_named_by_the_jobs_ranks(
        tmp_path, capsys):
    for rank in range(4):
        capture = samples.npu_capture(tmp_path, rank, trace=False, op_statistic=False)
        with open(_matrix_file(capture), "w") as handle:
            json.dump(_links_of(rank, 4, slow=(2, 3)), handle)
        samples.write_manifest(tmp_path, rank, world_size=4, selected_ranks=[0, 1, 2, 3],
                               parallel={"tensor_model_parallel_size": 1,
                                         "pipeline_model_parallel_size": 1,
                                         "data_parallel_size": 4, "context_parallel_size": 1,
                                         "world_size": 4})
    _, data = run_cli_json(capsys, "summary", tmp_path)
    matrix = data["communication_matrix"]
    [group] = matrix["groups"]
    assert (group["group"], group["ranks"], len(group["pairs"])) == ("dp0", [0, 1, 2, 3], 16)
    [slow] = matrix["slow_links"]
    assert (slow["src_rank"], slow["dst_rank"], slow["size_class"]) == (2, 3, "10-100 MB")
    assert slow["bandwidth_gbps"] == pytest.approx(5.0) and slow["peers_median_gbps"] == \
        pytest.approx(20.0) and slow["peers"] == 12
    page = _html(capsys, str(tmp_path), tmp_path)
    assert "2 → 3 (rank 2 → 3)" in page and "Bandwidth per link, dp0" in page


def test_node_reports_merge_to_one_machines_matrix_and_a_malformed_link_row_is_refused(
        tmp_path, capsys):

    data = tmp_path / "save"
    samples.two_ranks(data)
    _, alone = run_cli_json(capsys, "summary", data)
    for node in range(2):
        run_cli(capsys, "check", data, "--node", f"{node}/2", "--report",
                tmp_path / f"node{node}.json")
    code, merged = run_cli_json(capsys, "merge", tmp_path / "node0.json", tmp_path / "node1.json")
    assert merged["summary"]["communication_matrix"] == alone["communication_matrix"]
    good = json.loads((tmp_path / "node0.json").read_text())
    damage = {"summary.links[0] is": lambda d: d["summary"].update(links=[[0, "x"]]),
              "summary.links[0][2].rows[0] is": lambda d: d["summary"]["links"][0][2][
                  "rows"][0].__setitem__(6, float("inf"))}
    assert_merge_refuses(capsys, tmp_path, good, damage)
