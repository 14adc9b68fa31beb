"""`mindspeed-prof summary`: step breakdown (= msprof-analyze's), top kernels, slow ranks."""

import csv
import io
import os
import shutil
import subprocess

import pytest

from helpers.cli import rank_entry, run_cli, run_cli_json
from mindspeed_prof.output import summarize_directory
from mindspeed_prof.output.read import columns
from output_fixtures import corrupt, samples
from output_fixtures.torch_traces import torch_trace

COMPONENTS = columns.STEP_COMPONENTS


def summary(capsys, *args):
    return run_cli(capsys, "summary", *args)


def summary_json(capsys, *args):
    return run_cli_json(capsys, "summary", *args)


rank_of = rank_entry


def cluster_rows(path):
    """msprof-analyze's per-(step, rank) rows: {(rank, step): {column: float}}."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {(int(r["Index"]), int(r["Step"])): {k: float(v) for k, v in r.items()
                                                 if k in COMPONENTS}
            for r in rows if r["Type"] == "rank"}


def our_rows(data):
    return {(r["rank"], s["step"]): {k: v for k, v in s.items() if k in COMPONENTS}
            for r in data["ranks"] for s in r["steps"]}


def test_breakdown_equals_the_upstream_cluster_step_trace_time(tmp_path, capsys):
    samples.two_ranks(tmp_path)
    code, data = summary_json(capsys, tmp_path)
    reference = cluster_rows(samples.CLUSTER_STEP_TRACE)
    ours = our_rows(data)
    assert code == 0 and set(ours) == {(0, 2), (1, 2)}
    for key, values in ours.items():
        assert values == reference[key]


def test_breakdown_equals_msprof_analyze_run_on_the_same_input(tmp_path, capsys):
    if shutil.which("msprof-analyze") is None:
        pytest.skip("msprof-analyze is not installed (pip install msprof-analyze)")
    samples.two_ranks(tmp_path)
    code, data = summary_json(capsys, tmp_path)
    result = subprocess.run(["msprof-analyze", "cluster", "-d", str(tmp_path), "-m", "all",
                             "--export_type", "text"], capture_output=True, text=True,
                            timeout=300, cwd=tmp_path)
    output = tmp_path / "cluster_analysis_output" / "cluster_step_trace_time.csv"
    # msprof-analyze exits 0 even when it produced nothing: the file is the verdict
    assert output.exists(), result.stdout[-2000:] + result.stderr[-2000:]
    reference = cluster_rows(output)
    assert set(reference) == set(our_rows(data)) == {(0, 2), (1, 2)}
    for key, values in our_rows(data).items():
        assert values == reference[key]


def test_step_time_is_computing_plus_exposed_communication_plus_free(tmp_path, capsys):
    samples.two_ranks(tmp_path)
    _, data = summary_json(capsys, tmp_path)
    step = rank_of(data, 0)["steps"][0]
    assert step["step_time"] == step["Computing"] + step["Communication(Not Overlapped)"] + \
        step["Free"]
    assert data["overall"]["max_step_time_us"] == rank_of(data, 1)["step_time_us"]


def test_slow_ranks_are_ordered_and_explained(tmp_path, capsys):
    samples.two_ranks(tmp_path)
    _, data = summary_json(capsys, tmp_path)
    slow = data["slow_ranks"]
    # judged by the waits in collectives (communication.json), most waited-for first; the
    # step-time deviation and the part that explains it stay beside
    assert [s["rank"] for s in slow] == [r["rank"] for r in data["waits"]["ranks"]]
    assert all(s["judged_by"] == "waits" for s in slow)
    by_rank = {s["rank"]: s for s in slow}
    assert by_rank[1]["deviation_us"] > 0 and by_rank[1]["explained_by"] == \
        "Communication(Not Overlapped)"
    assert by_rank[0]["explained_by"] is None


def test_top_kernels_are_totals_by_name_and_type(tmp_path, capsys):
    samples.two_ranks(tmp_path)
    _, data = summary_json(capsys, tmp_path, "--top", "3")
    kernels = rank_of(data, 1)["top_kernels"]
    path = os.path.join(samples.sample_output(1), "kernel_details.csv")
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    totals = {}
    for row in rows:
        key = (row["Name"], row["Type"])
        totals[key] = totals.get(key, 0.0) + float(row["Duration(us)"])
    expected = sorted(totals.items(), key=lambda kv: -kv[1])[:3]
    assert [(k["name"], k["type"]) for k in kernels] == [k for k, _ in expected]
    assert kernels[0]["total_us"] == pytest.approx(expected[0][1])
    assert kernels[0]["share_pct"] == pytest.approx(100 * expected[0][1] / sum(totals.values()))
    assert kernels[0]["mean_us"] == pytest.approx(kernels[0]["total_us"] / kernels[0]["count"])


def test_op_types_come_from_op_statistic_or_else_from_kernel_types(tmp_path, capsys):
    samples.npu_capture(tmp_path, 0)
    samples.npu_capture(tmp_path, 1, op_statistic=False)
    _, data = summary_json(capsys, tmp_path)
    assert rank_of(data, 0)["op_types_source"] == "op_statistic.csv"
    assert rank_of(data, 1)["op_types_source"].startswith("kernel_details.csv")
    assert rank_of(data, 0)["op_types"][0]["name"] == "FlashAttentionScore"


def test_op_statistic_with_device_id_is_read_by_name(tmp_path, capsys):
    path = samples.npu_capture(tmp_path, 0)
    out = os.path.join(path, samples.OUTPUT)
    samples.write_op_statistic(os.path.join(out, "kernel_details.csv"),
                               os.path.join(out, "op_statistic.csv"), device_id=0)
    _, data = summary_json(capsys, tmp_path)
    assert rank_of(data, 0)["op_types"][0]["type"] == "MIX_AIC"


def test_an_unreadable_table_is_a_note_not_a_failure(tmp_path, capsys):
    path = samples.npu_capture(tmp_path, 0)
    corrupt.truncate(os.path.join(path, samples.OUTPUT, "kernel_details.csv"), 0.5)
    code, data = summary_json(capsys, tmp_path)
    entry = rank_of(data, 0)
    assert code == 0 and entry["top_kernels"] == [] and entry["steps"]
    assert any("cut short" in n for n in entry["notes"])


def test_an_npu_step_the_manifest_says_never_ran_is_left_out_with_a_note(tmp_path, capsys):
    # torch_npu parses later, so step_trace_time.csv keeps the step opened as the loop ended.
    path = samples.npu_capture(tmp_path, 0)
    table = os.path.join(path, samples.OUTPUT, "step_trace_time.csv")
    with open(table, newline="") as handle:
        header, row = list(csv.reader(handle))[:2]
    with open(table, "a", newline="") as handle:
        csv.writer(handle).writerow(["3"] + [str(10 * float(v)) for v in row[1:]])
    window = {"start": 2, "end": None, "dir": ".", "status": "complete",
              "files": [os.path.basename(path)], "iterations_recorded": [2], "never_ran": 3}
    samples.write_manifest(tmp_path, 0, selected_ranks=[0], windows=[window])
    code, data = summary_json(capsys, tmp_path)
    entry = rank_of(data, 0)
    assert code == 0 and [s["step"] for s in entry["steps"]] == [2]
    assert entry["breakdown_us"]["Computing"] == pytest.approx(float(row[1]))
    assert any("step 3 left out of step times" in n and "never ran" in n
               for n in entry["notes"])


def test_torch_trace_gives_step_durations_and_operators_by_self_time(tmp_path, capsys):
    torch_trace(tmp_path, rank=0, start=5, end=8)
    torch_trace(tmp_path, rank=1, start=5, end=8)
    code, data = summary_json(capsys, tmp_path)
    entry = rank_of(data, 0)
    assert code == 0 and entry["backend"] == "torch"
    assert [s["step"] for s in entry["steps"]] == [5, 6, 7]
    assert all(s["step_time"] > 0 for s in entry["steps"])
    names = [o["name"] for o in entry["top_ops"]]
    assert "aten::addmm" in names or "aten::linear" in names
    assert not any(n.startswith("ProfilerStep#") for n in names)
    assert len(data["slow_ranks"]) == 2


def test_csv_output_is_long_format(tmp_path, capsys):
    samples.two_ranks(tmp_path)
    code, out, _ = summary(capsys, tmp_path, "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and rows[0].keys() == {"section", "rank", "step", "name", "type",
                                             "metric", "value"}
    computing = [r for r in rows if r["section"] == "step" and r["metric"] == "Computing"]
    assert {(r["rank"], r["step"]) for r in computing} == {("0", "2"), ("1", "2")}


def test_table_output_names_the_sections(tmp_path, capsys):
    samples.two_ranks(tmp_path)
    code, out, _ = summary(capsys, tmp_path)
    assert code == 0
    for text in ("Step time and breakdown", "Slow ranks", "Top 10 kernels", "Top 10 op types",
                 "FlashAttentionScore"):
        assert text in out


def test_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    samples.two_ranks(tmp_path / "prof")
    target = tmp_path / "steps.png"
    code, out, _ = summary(capsys, tmp_path / "prof", "--plot", target)
    assert code == 0 and target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_needs_a_png_name(tmp_path, capsys):
    samples.two_ranks(tmp_path)
    code, _, err = summary(capsys, tmp_path, "--plot", tmp_path / "x.jpg")
    assert code == 2 and "--plot" in err and ".png" in err


def test_bad_top_and_missing_dir_are_usage_errors(tmp_path, capsys):
    assert summary(capsys, tmp_path, "--top", "0")[0] == 2
    code, _, err = summary(capsys, tmp_path / "nope")
    assert code == 2 and "nope" in err


def test_nothing_to_summarise_exits_one(tmp_path, capsys):
    code, out, err = summary(capsys, tmp_path)
    assert code == 1 and "nothing to summarise" in err  # once, where scripts look
    assert "nothing to summarise" not in out


def test_programmatic_api(tmp_path):
    samples.two_ranks(tmp_path)
    result = summarize_directory(str(tmp_path), top=5)
    assert [r.rank for r in result.ranks] == [0, 1]
    assert result.rank(0).breakdown()["Computing"] == pytest.approx(75174.57464453117)


def test_a_directory_whose_only_capture_is_unreadable_exits_one_with_the_reason(tmp_path,
                                                                               capsys):
    trace = torch_trace(tmp_path, rank=0)
    with open(trace, "r+") as handle:  # cut short, as by a full disk
        handle.truncate(os.path.getsize(trace) // 2)
    code, out, err = summary(capsys, tmp_path)
    assert code == 1
    assert "nothing could be summarised" in err and os.path.basename(trace) in err
