"""`mindspeed-prof report DIR -o FILE.html`: one self-contained page whose numbers are
summary --json's, readable at 1,024 ranks, bounded in size, for torch and NPU output alike."""

import os
import re
import sys

import pytest

from helpers.cli import run_cli, run_cli_json
from helpers.report_page import read_page
from mindspeed_prof.output.report import heatmap, sections, write
from output_fixtures import corrupt, samples
from output_fixtures.simulated_job import NELEMS, simulated_job

pytest.importorskip("plotly")

SLOW = {5: "compute", 2: "comm", 6: "free"}
SECTIONS = ("Who makes whom wait", "Verdicts", "Rank × iteration heatmaps",
            "Breakdown per iteration", "Slow ranks",
            "Per-rank breakdown", "Top operators", "Communication per group",
            "Captures taken by themselves", "Memory")


def report(capsys, directory, out, *args):
    code, stdout, stderr = run_cli(capsys, "report", directory, "-o", out, *args)
    return code, stdout, stderr


@pytest.fixture(scope="module")
def eight_ranks(tmp_path_factory):
    """An 8-rank synchronous torch job, TP=2 x DP=4 on two hosts (rank 5 computes longer, rank
    2's DP group has slow links, rank 6 stalls on the host) and its report."""
    folder = tmp_path_factory.mktemp("job")
    simulated_job(str(folder / "prof"), ranks=8, slow=SLOW, tp=2, hosts=4)
    return str(folder / "prof"), str(folder / "report.html")


@pytest.fixture
def written(eight_ranks, capsys):
    directory, out = eight_ranks
    code, stdout, _ = report(capsys, directory, out)
    assert code == 0
    return directory, out, stdout


def test_the_report_has_every_section_and_says_its_size_and_bound(written):
    _, out, stdout = written
    page = read_page(out)
    assert list(page.sections) == list(SECTIONS)
    size = os.path.getsize(out)
    said = re.search(r"report written to (\S+): ([\d.]+) MiB .*bound ([\d.]+) MiB", stdout)
    assert said and said.group(1) == out
    assert float(said.group(2)) == pytest.approx(size / (1 << 20), abs=0.05)
    assert size < float(said.group(3)) * (1 << 20)


def test_the_page_loads_nothing_from_the_network(written):
    text = read_page(written[1]).text
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|@import", text)
    assert "cdn.plot.ly" not in text.split("</script>", 1)[1]  # plotly.js is inline, once
    assert text.count("<script>") == 2


def test_every_time_in_the_tables_equals_summary_json(written, capsys):
    directory, out, _ = written
    page = read_page(out)
    _, summary = run_cli_json(capsys, "summary", directory)
    ranks = page.table("ranks")
    for rank in summary["ranks"]:
        [row] = ranks.by("RANK", str(rank["rank"]))
        assert row[3].us == rank["breakdown_us"]["step_time"]
        assert row[4].us == rank["breakdown_us"]["Computing"]
        assert row[3].text == f"{rank['breakdown_us']['step_time'] / 1000:.3f}"
    slow = page.table("slow-ranks")
    for entry in summary["slow_ranks"]:
        if not entry["slow"]:
            assert not slow.by("RANK", str(entry["rank"]))  # only slow ranks are listed
            continue
        [row] = slow.by("RANK", str(entry["rank"]))
        assert row[3].us == entry["made_wait_us"]
        assert row[6].us == entry["step_time_us"] and row[7].us == entry["deviation_us"]
    ops = page.table("top_ops")
    for item in summary["overall"]["top_ops"]:
        [row] = ops.by("NAME", item["name"])
        assert row[2].us == item["total_us"] and row[3].text == str(item["count"])


def test_each_heatmap_cell_is_that_ranks_step_in_ms(written, capsys):
    directory, out, _ = written
    _, summary = run_cli_json(capsys, "summary", directory)
    maps = {f["layout"]["title"]["text"]: f["data"][0] for f in read_page(out).heatmaps()}
    # nothing overlaps in this job: that panel is one neutral grey and says so
    # a CPU trace: what no operator covers is the host's own (Python) time, and says so
    assert set(maps) == {(heatmap.HOST_FREE if key == "Free" else title)
                         + (" — all zero" if key == "Overlapped" else "")
                         for key, title in heatmap.PARTS} | {"Lateness at arrival (ms)"}
    assert maps["Communication overlapped — all zero"]["showscale"] is False
    # colour from zero: equal step times are not drawn as the full scale
    assert maps["Step time"]["zmin"] == 0.0
    step_time = maps["Step time"]
    # rows in the layout's order (TP=2: each TP coordinate's DP ranks together)
    assert step_time["y"] == [f"rank {r}" for r in (0, 2, 4, 6, 1, 3, 5, 7)]
    assert step_time["x"] == ["5", "6", "7"]
    for rank in summary["ranks"]:
        row = step_time["y"].index(f"rank {rank['rank']}")
        for step in rank["steps"]:
            column = step_time["x"].index(str(step["step"]))
            assert step_time["z"][row][column] == step["step_time"] / 1000.0
            assert maps["Computing"]["z"][row][column] == step["Computing"] / 1000.0


def test_slow_ranks_are_the_ranks_others_wait_for_named_with_their_reason(written, capsys):
    directory, out, _ = written
    page = read_page(out)
    slow = page.table("slow-ranks")
    reasons = {row[0].text: (row[1].text, row[2].text, row[5].text) for row in slow.rows}
    # every rank's step time is the same; the others wait for 5 and 6 in their DP groups
    assert reasons == {
        "5": ("tp1 pp0 dp2", "dp1 all-reduce", "compute-bound: aten::mm +200 %"),
        "6": ("tp0 pp0 dp3", "dp0 all-reduce",
              "host-bound: host time outside operators +1.600 ms per step")}
    assert all(row[7].text == "+0.000 (+0.0%)" for row in slow.rows)
    # one backend: no BACKEND column (it was always empty), and only the slow ranks: no rows
    # of +0.000 padding the table to 16
    assert "BACKEND" not in slow.header and len(slow.rows) == 2
    groups = {row[0].text: row[-1].text for row in page.table("waits-groups").rows}
    assert groups["dp0"].startswith("slow link: transfers 0.900 ms vs 0.300 ms")  # rank 2's
    assert groups["dp1"] == "-"
    assert page.sections[0] == "Who makes whom wait"


def test_a_rank_within_five_percent_of_the_median_is_not_listed():
    from mindspeed_prof.output.report import reasons

    entries = [{"rank": r, "step_time_us": t, "deviation_us": t - 1000.0,
                "deviation_pct": (t - 1000.0) / 10.0, "explained_by": "Computing",
                "component_deltas_us": {"Computing": t - 1000.0}}
               for r, t in ((3, 1060.0), (1, 1001.0), (0, 1000.0))]
    found = reasons.slow_ranks(entries)
    assert [(row["rank"], row["reason"]) for row in found["rows"]] == [(3, "compute-bound")]
    assert found["slow"] == 1 and found["of"] == 3 and not found["mixed"]


def test_communication_counts_bytes_and_time_per_group_named_by_the_layout(written):
    table = read_page(written[1]).table("communication")
    rows = {row[0].text: row for row in table.rows}
    # each DP group's gradient all-reduce, named dp0 / dp1 from the ranks that record it
    assert set(rows) == {"dp0", "dp1", "world"}
    for name in ("dp0", "dp1"):
        assert [c.text for c in rows[name][1:4]] == ["allreduce", "4", str(4 * 3)]
        assert rows[name][4].text == f"{4 * 3 * NELEMS * 4 / (1 << 20):.2f} MiB"
    # dp0 holds rank 2's slow links: 900 us per transfer, against dp1's 300
    assert float(rows["dp0"][6].text) < float(rows["dp1"][6].text)
    assert [c.text for c in rows["world"][1:4]] == ["allreduce", "8", str(8 * 3)]


def test_the_per_step_breakdown_is_the_mean_over_ranks(written, capsys):
    directory, out, _ = written
    _, summary = run_cli_json(capsys, "summary", directory)
    table = read_page(out).table("per-step")
    for step in (5, 6, 7):
        [row] = table.by("ITERATION", str(step))
        times = [s["step_time"] for r in summary["ranks"] for s in r["steps"]
                 if s["step"] == step]
        assert row[3].us == pytest.approx(sum(times) / len(times))
        # the rank the others waited for most: ranks 5 and 6 each keep their DP group waiting
        # 1.6 ms a member (a tie: the lower is shown); the loss all-reduce's wait that follows
        # is dp0's slow links' (rank 2's group ends 600 us later), no rank's
        assert row[-2].text == "5"


def test_a_1024_rank_job_is_banded_into_64_rows_and_stays_under_the_bound(tmp_path, capsys):
    directory = simulated_job(str(tmp_path / "prof"), ranks=1024, slow={700: "compute"},
                              tp=8, hosts=8)
    out = str(tmp_path / "report.html")
    code, stdout, _ = report(capsys, directory, out)
    assert code == 0
    page = read_page(out)
    maps = {f["layout"]["title"]["text"]: f["data"][0] for f in page.heatmaps()}
    step_time = maps["Step time (band: slowest rank)"]
    # banded in the layout's order, as the lateness map: one TP coordinate's DP ranks a band
    assert len(step_time["y"]) == heatmap.MAX_ROWS and step_time["y"][0] == "pp0 tp0 dp0-15"
    # a synchronous job: rank 700's step is everyone's, so the step-time map is flat...
    assert {v for row in step_time["z"] for v in row} == {step_time["z"][0][0]}
    # ...and the lateness map finds it: banded in the layout's order (tp, then dp)
    late = maps["Lateness at arrival (ms) (band: slowest rank)"]
    assert len(late["y"]) == heatmap.MAX_ROWS and late["y"][0] == "pp0 tp0 dp0-15"
    band = late["y"].index("pp0 tp4 dp80-95")  # rank 700 = tp 4, dp 87
    # 1.6 ms late at its DP all-reduce and, never having waited, at the world's loss one
    assert late["z"][band][0] == pytest.approx(2 * 2 * 800 / 1000) and "(rank 700)" in \
        late["text"][band][0]
    assert max(late["z"][band - 1]) == 0.0  # its DP peers passed the lateness on
    [slow] = page.table("slow-ranks").rows
    # most of the waiting is the other 896 ranks' in the world-wide all-reduce, passed on
    assert [c.text for c in slow[:3]] == ["700", "tp4 pp0 dp87", "world all-reduce"]
    assert len(page.table("ranks").rows) == 1024
    size = os.path.getsize(out)
    plotly_js = len(write.plotlyjs().encode())
    assert size - plotly_js < write.DATA_BOUND
    print(f"1,024 ranks: {size / (1 << 20):.2f} MiB, page without plotly.js "
          f"{(size - plotly_js) / 1024:.0f} KiB", file=sys.stderr)


def test_the_real_npu_samples_render_with_their_breakdown_and_communication(tmp_path, capsys):
    samples.two_ranks(tmp_path / "prof")
    out = str(tmp_path / "npu.html")
    code, _, _ = report(capsys, tmp_path / "prof", out)
    assert code == 0
    _, summary = run_cli_json(capsys, "summary", tmp_path / "prof")
    page = read_page(out)
    ranks = page.table("ranks")
    for rank in summary["ranks"]:
        [row] = ranks.by("RANK", str(rank["rank"]))
        assert [c.us for c in row[3:]] == [rank["breakdown_us"].get(k)
                                           for k in sections.PARTS if k in rank["breakdown_us"]]
    kernels = page.table("top_kernels")
    assert [r[0].text for r in kernels.rows] == [k["name"] for k in
                                                  summary["overall"]["top_kernels"]]
    comm = page.table("communication")
    kinds = {row[1].text for row in comm.rows}
    assert kinds and all(row[4].text != "-" for row in comm.rows)  # communication.json's sizes
    assert "read from: communication.json" in page.text


def test_a_request_unit_labels_the_axes_and_tables(tmp_path, capsys):
    directory = simulated_job(str(tmp_path / "prof"), ranks=2)
    samples.write_manifest(directory, 0, unit="request")
    samples.write_manifest(directory, 1, unit="request")
    out = str(tmp_path / "r.html")
    report(capsys, directory, out)
    page = read_page(out)
    assert "Rank × request heatmaps" in page.sections
    assert page.heatmaps()[0]["layout"]["xaxis"]["title"]["text"] == "request"
    assert page.table("per-step").header[0] == "REQUEST"


def test_nothing_read_from_the_files_reaches_the_page_as_markup(tmp_path, capsys):
    directory = simulated_job(str(tmp_path / "prof"), ranks=2)
    with open(os.path.join(directory, "rank7.<script>alert(1)<b>.pt.trace.json"), "w") as f:
        f.write('{"traceEvents": [')
    out = str(tmp_path / "x.html")
    report(capsys, directory, out)
    text = read_page(out).text
    assert "<script>alert" not in text and "<b>" not in text
    assert "&lt;script&gt;alert(1)&lt;b&gt;" in text


def test_bad_input_is_one_line_naming_the_fix_and_exit_2(tmp_path, capsys):
    simulated_job(str(tmp_path / "prof"), ranks=1)
    cases = [((tmp_path / "nope", "-o", tmp_path / "r.html"), "DIR"),
             ((tmp_path / "prof", "-o", tmp_path / "r.txt"), "-o"),
             ((tmp_path / "prof", "-o", tmp_path / "no" / "r.html"), "does not exist"),
             ((tmp_path / "prof", "-o", tmp_path / "r.html", "--top", "0"), "--top"),
             ((tmp_path / "prof", "-o", tmp_path / "r.html", "--baseline", tmp_path / "no"),
              "--baseline")]
    for args, named in cases:
        code, out, err = run_cli(capsys, "report", *args)
        assert code == 2 and named in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1


def test_without_plotly_the_command_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    simulated_job(str(tmp_path / "prof"), ranks=1)
    monkeypatch.setitem(sys.modules, "plotly.offline", None)
    code, _, err = run_cli(capsys, "report", tmp_path / "prof", "-o", tmp_path / "r.html")
    assert code == 2 and "pip install 'mindspeed_prof[report]'" in err
    assert not os.path.exists(tmp_path / "r.html")


def test_a_directory_with_nothing_summarised_writes_the_page_and_exits_1(tmp_path, capsys):
    os.makedirs(tmp_path / "empty")
    code, _, _ = run_cli(capsys, "report", tmp_path / "empty", "-o", tmp_path / "r.html")
    assert code == 1 and os.path.exists(tmp_path / "r.html")


def test_rl_output_gives_the_cross_role_table_and_each_roles_report(tmp_path, capsys):
    from helpers.role_runs import profile_role

    save = tmp_path / "prof"
    for rank in (0, 1):
        profile_role(save, "rollout", rank, stages=("generate",))
    profile_role(save, "actor", 0, stages=("update",))
    capsys.readouterr()
    out = str(tmp_path / "rl.html")
    code, _, _ = report(capsys, save, out)
    assert code == 0
    _, cross = run_cli_json(capsys, "summary", save)
    page = read_page(out)
    assert page.sections[0] == "RL steps per role"
    roles = page.table("roles")
    for step in cross["rl_steps"]:
        for row in step["roles"]:
            [cells] = [r for r in roles.by("RL STEP", str(step["step"]))
                       if r[1].text == row["role"]]
            assert cells[3].us == row["step_us"] and cells[4].text == str(row["slowest_rank"])
    for role in ("actor", "rollout"):
        assert f"{role}: Rank × RL step heatmaps" in page.sections
        _, mine = run_cli_json(capsys, "summary", save / role)
        ranks = page.table("ranks", index=["actor", "rollout"].index(role))
        for rank in mine["ranks"]:
            [row] = ranks.by("RANK", str(rank["rank"]))
            assert row[3].us == rank["breakdown_us"]["step_time"]


def test_with_a_baseline_the_diff_is_diffs_own_numbers(tmp_path, capsys, eight_ranks):
    directory, _ = eight_ranks
    baseline = simulated_job(str(tmp_path / "base"), ranks=8, slow={2: "comm"}, tp=2, hosts=4)
    out = str(tmp_path / "b.html")
    code, _, _ = report(capsys, directory, out, "--baseline", baseline)
    assert code == 0
    _, diff = run_cli_json(capsys, "diff", baseline, directory)
    page = read_page(out)
    # read right after the verdicts (it sat last, under memory and the notes: issue 35)
    assert page.sections[:4] == ["Who makes whom wait", "Verdicts", "Against the baseline",
                                 "Rank × iteration heatmaps"]
    steps = page.table("diff-steps")
    for step in diff["steps"]:
        [row] = steps.by("STEP", str(step["b_step"]))
        assert [row[1].us, row[2].us, row[3].us] == [step["a"]["step_time"],
                                                     step["b"]["step_time"],
                                                     step["change"]["step_time"]]
    grew = page.table("diff-grew").rows[0]
    assert grew[0].text == diff["grew"][0]["name"]
    assert grew[4].us == diff["grew"][0]["change_us"]
    # step times are equal in a synchronous job: the slow ranks are the ones others wait for
    # (each keeps its DP group waiting as long: a tie, the lower rank first)
    assert [r["rank"] for r in diff["slow_ranks"]["b"]] == [5, 6] and not diff["slow_ranks"]["a"]
    assert diff["slow_ranks"]["new"] == [5, 6]
    assert [row[1].text for row in page.table("diff-slow").rows] == [
        r["line"] for r in diff["slow_ranks"]["b"]]


def test_a_corrupt_ranks_row_is_labelled_with_its_rank_alone(tmp_path, capsys):
    directory = simulated_job(str(tmp_path / "prof"), ranks=3)
    corrupt.truncate(next((tmp_path / "prof").glob("rank1.*")))
    out = str(tmp_path / "r.html")
    code, _, _ = report(capsys, directory, out)
    assert code == 0
    page = read_page(out)
    [step_time] = [f["data"][0] for f in page.heatmaps()
                   if f["layout"]["title"]["text"] == "Step time"]
    assert step_time["y"] == ["rank 0", "rank 1", "rank 2"]
    assert "None" not in page.text.split("<main>", 1)[1]  # plotly.js itself names None


def test_an_inference_run_gives_each_requests_latency_as_summary_does(tmp_path, capsys):
    from helpers.inference import armed, config, serve

    driver = armed(config(tmp_path))
    serve(driver, 4)
    driver.close()
    out = str(tmp_path / "inference.html")
    code, _, _ = report(capsys, tmp_path / "prof", out)
    assert code == 0
    _, summary = run_cli_json(capsys, "summary", tmp_path / "prof")
    page = read_page(out)
    assert "Rank × request heatmaps" in page.sections and "Requests" in page.sections
    table = page.table("requests")
    [rank] = summary["ranks"]
    assert [(r[1].text, r[2].us, r[3].text) for r in table.rows] == [
        (str(row["request"]), row["latency_us"], str(row["forwards"]))
        for row in rank["requests"]]


def test_an_npu_db_export_renders_and_says_it_has_no_communication_json(tmp_path, capsys):
    samples.db_capture(tmp_path / "prof")
    out = str(tmp_path / "db.html")
    code, _, _ = report(capsys, tmp_path / "prof", out)
    _, summary = run_cli_json(capsys, "summary", tmp_path / "prof")
    page = read_page(out)
    assert code == 0
    [rank] = summary["ranks"]
    [row] = page.table("ranks").rows
    assert row[3].us == rank["breakdown_us"]["step_time"]
    assert "1 NPU capture(s) without ASCEND_PROFILER_OUTPUT/communication.json" in page.text


def test_npu_bytes_count_sdma_once_and_bandwidth_is_over_the_transports_transit_time(
        tmp_path, capsys):
    # communication.json of the samples: hcom_allReduce__483_2 moved 146.80064 MB over HCCS,
    # which SDMA repeats (SDMA = HCCS + PCIE), in 7.65872 ms (rank 1) and 7.65389 ms (rank 0),
    # while the operator's own "Transit Time(ms)" reads 0; __483_19 moved 0.49152 MB in
    # 0.0185 ms on rank 1 only
    samples.two_ranks(tmp_path / "prof")
    out = str(tmp_path / "npu.html")
    report(capsys, tmp_path / "prof", out)
    [row] = [r for r in read_page(out).table("communication").by("GROUP", "9350434047717501483")
             if r[1].text == "allreduce"]
    moved = (2 * 146.80064 + 0.49152) * 1e6
    assert row[4].text == f"{moved / (1 << 20):.2f} MiB"
    assert float(row[6].text) == pytest.approx(
        moved / ((7.658720000000001 + 7.653889988281249 + 0.0185) * 1e6), abs=0.005)


def test_the_reports_numbers_are_summary_json_itself(eight_ranks, tmp_path, capsys):
    # one computation, two renderings: what the page is drawn from is summary --json's dict
    import json

    from mindspeed_prof.output.render import jsontext
    from mindspeed_prof.output.report.build import summary_data

    samples.two_ranks(tmp_path / "npu")
    for directory in (eight_ranks[0], str(tmp_path / "npu")):
        _, printed = run_cli_json(capsys, "summary", directory)
        assert json.loads(jsontext.dumps(summary_data(directory, 10, None),
                                         default=str)) == printed


def test_a_capture_taken_by_the_slow_step_rule_is_shown_with_its_reason(tmp_path, monkeypatch):
    from helpers.captures_loop import UnitClock, settings, train

    from mindspeed_prof.control import captures

    clock = UnitClock()
    monkeypatch.setattr(captures, "_clock", clock)
    train(settings(tmp_path / "prof"), clock, {12: 0.5}, iterations=16)
    out = str(tmp_path / "c.html")
    from mindspeed_prof.cli import main

    assert main(["report", str(tmp_path / "prof"), "-o", out]) == 0
    text = read_page(out).text
    assert "slow step" in text and "iteration 12 took 0.5 s" in text
    assert "iter_13-15" in text


def test_a_unit_name_that_is_not_plain_words_never_reaches_the_figures(tmp_path, capsys):
    directory = simulated_job(str(tmp_path / "prof"), ranks=1)
    samples.write_manifest(directory, 0, unit="<a href='javascript:alert(1)'>x</a>")
    out = str(tmp_path / "u.html")
    report(capsys, directory, out)
    page = read_page(out)
    after_plotly_js = page.text.split("</script>", 1)[1]
    assert "javascript:" not in after_plotly_js
    assert page.heatmaps()[0]["layout"]["xaxis"]["title"]["text"] == "iteration"


def test_past_64_rank_rows_and_128_steps_the_heatmap_bands_both():
    ranks = [{"rank": r, "backend": "torch",
              "steps": [{"step": s, "step_time": float(r * 1000 + s)} for s in range(300)]}
             for r in range(65)]
    matrix = heatmap.matrices(ranks)
    assert len(matrix["y"]) == 33 and matrix["y"][0] == "ranks 0-1" and matrix["y"][-1] == "rank 64"
    assert len(matrix["x"]) == 100 and matrix["x"][0] == "0-2" and matrix["banded_columns"]
    [part] = matrix["parts"]
    assert part["z_ms"][0][0] == (1000 + 2) / 1000.0  # the band's slowest: rank 1, step 2
    assert "(rank 1)" in part["text"][0][0]
    exact = heatmap.matrices(ranks[:64])
    assert len(exact["y"]) == 64 and not exact["banded_rows"]


def test_the_lateness_map_is_bounded_in_rows_and_steps_and_an_all_zero_map_is_neutral():
    from mindspeed_prof.output.report import waits

    ranks, steps = list(range(1000)), list(range(300))
    late = [[0.0] * 300 for _ in ranks]
    late[777][150] = 2500.0
    matrix = waits.lateness_matrix({"lateness": {"ranks": ranks, "steps": steps, "us": late},
                                    "layout": None})
    assert len(matrix["y"]) <= heatmap.MAX_ROWS and len(matrix["x"]) <= heatmap.MAX_COLUMNS
    assert max(v for row in matrix["z_ms"] for v in row) == 2.5
    assert any("(rank 777)" in t and t.startswith("2.500") for row in matrix["text"]
               for t in row)
    assert matrix["scale"]["zmin"] == 0.0 and not matrix["scale"]["zero"]
    late[777][150] = 0.0
    calm = waits.lateness_matrix({"lateness": {"ranks": ranks, "steps": steps, "us": late},
                                  "layout": None})
    assert calm["scale"]["zero"] and calm["scale"]["colorscale"][0][1] == \
        calm["scale"]["colorscale"][1][1]


def test_step_time_bands_follow_the_pp_stages_of_a_1024_rank_tp_pp_dp_layout():
    # --use-tp-pp-dp-mapping: rank = tp + 8 * (pp + 4 * dp), so ranks 0-7 are stage 0, ranks
    # 8-15 stage 1, ...: a band of 16 consecutive ranks would mix two stages
    layout = {"tp": 8, "cp": 1, "dp": 32, "pp": 4, "world": 1024, "order": "tp-pp-dp"}
    stage = {r: (r // 8) % 4 for r in range(1024)}
    # a synchronous job whose stage 3 computes longest: every rank's step time is the same,
    # its Computing is not
    ranks = [{"rank": r, "backend": "npu",
              "steps": [{"step": 1, "step_time": 4000.0,
                         "Computing": 1000.0 * (1 + stage[r])}]} for r in range(1024)]
    matrix = heatmap.matrices(ranks, layout)
    assert matrix["in_layout_order"] and len(matrix["y"]) == heatmap.MAX_ROWS
    assert matrix["y"][:3] == ["pp0 tp0 dp0-15", "pp0 tp0 dp16-31", "pp0 tp1 dp0-15"]
    assert matrix["y"][-1] == "pp3 tp7 dp16-31"
    computing = next(p for p in matrix["parts"] if p["key"] == "Computing")
    # each band is one stage: its slowest is its own stage's time, never a neighbour stage's
    assert [row[0] for row in computing["z_ms"]] == [1.0 + s for s in range(4) for _ in range(16)]
    consecutive = heatmap.matrices(ranks)
    assert not consecutive["in_layout_order"] and consecutive["y"][0] == "ranks 0-15"
    assert {row[0] for row in next(p for p in consecutive["parts"]
                                   if p["key"] == "Computing")["z_ms"]} == {2.0, 4.0}
