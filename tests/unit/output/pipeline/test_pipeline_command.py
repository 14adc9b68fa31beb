"""``mindspeed-prof pipeline``: each stage's bubble from the schedule marks, split into the
schedule's warm-up/cool-down and the stall, beside the schedule's theory; the stage that holds
the pipeline back; strict JSON and one-line usage errors."""

import json

import pytest

from helpers.cli import run_cli, run_cli_json
from output_fixtures.pipeline_job import pipeline_job
from mindspeed_prof.output.pipeline.bubble import theory


def test_the_theory_is_p_minus_1_over_v_m_plus_p_minus_1():
    assert theory("1f1b", 4, 1, 8) == pytest.approx(3 / 11)
    assert theory("interleaved", 4, 2, 8) == pytest.approx(3 / 19)
    assert theory("no-pipelining", 1, 1, 8) == 0.0
    assert theory("replaced", 4, 1, 8) is None  # another package's schedule: shape unknown


def test_a_balanced_1f1b_pipeline_has_exactly_the_textbook_bubble_and_no_stall(tmp_path, capsys):
    pipeline_job(tmp_path, stages=4, microbatches=8)
    code, report = run_cli_json(capsys, "pipeline", tmp_path)
    assert code == 0
    assert (report["schedule"], report["stages"], report["microbatches"]) == ("1f1b", 4, 8)
    (replica,) = report["replicas"]
    assert [s["stage"] for s in replica["stages"]] == [0, 1, 2, 3]
    for stage in replica["stages"]:
        assert stage["bubble"] == pytest.approx(3 / 11, abs=1e-3)
        assert stage["theory"] == pytest.approx(3 / 11, abs=1e-3)
        assert stage["stall_ms"] == pytest.approx(0.0, abs=1e-3)
        assert stage["warmup_cooldown_ms"] == pytest.approx(3 * 3.0)  # 3 other stages x 3 ms
    assert replica["holds_back"] is None


def test_a_balanced_interleaved_pipeline_s_bubble_is_megatron_s_interleaved_bubble(
        tmp_path, capsys):
    # Megatron's interleaved order for p=2 stages, v=2 virtual chunks, m=2 microbatches, a
    # forward of a chunk 1.5 ms, a backward 3 ms, every stage alike ((mb, chunk); each op starts
    # when its stage is free and its input there: the previous chunk's forward, the next
    # chunk's backward, in the model's chunk order s0c0 s1c0 s0c1 s1c1):
    #   stage 0: F(0,0) 0-1.5  F(1,0) 1.5-3  F(0,1) 3-4.5  F(1,1) 4.5-6  B(0,1) 9-12
    #            B(1,1) 13.5-16.5  B(0,0) 16.5-19.5  B(1,0) 19.5-22.5
    #   stage 1: F(0,0) 1.5-3  F(1,0) 3-4.5  F(0,1) 4.5-6  B(0,1) 6-9  F(1,1) 9-10.5
    #            B(1,1) 10.5-13.5  B(0,0) 13.5-16.5  B(1,0) 16.5-19.5
    # Each stage computes 18 of the 22.5 ms: its bubble is 4.5 ms, (p-1) x (the stage's time per
    # microbatch, 9 ms) / v, which is Megatron's interleaved bubble, (p-1)/(v x m) of the
    # compute: 1/4; of the step, (p-1)/(v x m + p-1) = 1/5.
    f, b = "forward-compute", "backward-compute"
    timeline = {
        0: [(f, 0, 0, 1.5, 0), (f, 1, 1.5, 3, 0), (f, 0, 3, 4.5, 1), (f, 1, 4.5, 6, 1),
            (b, 0, 9, 12, 1), (b, 1, 13.5, 16.5, 1), (b, 0, 16.5, 19.5, 0),
            (b, 1, 19.5, 22.5, 0)],
        1: [(f, 0, 1.5, 3, 0), (f, 1, 3, 4.5, 0), (f, 0, 4.5, 6, 1), (b, 0, 6, 9, 1),
            (f, 1, 9, 10.5, 1), (b, 1, 10.5, 13.5, 1), (b, 0, 13.5, 16.5, 0),
            (b, 1, 16.5, 19.5, 0)]}
    in_us = {s: [(t, mb, lo * 1000, hi * 1000, c) for t, mb, lo, hi, c in ops]
             for s, ops in timeline.items()}
    pipeline_job(tmp_path, stages=2, microbatches=2, timeline=in_us, chunks=2)
    code, report = run_cli_json(capsys, "pipeline", tmp_path)
    assert code == 0
    assert (report["schedule"], report["virtual_chunks"], report["microbatches"]) == \
        ("interleaved", 2, 2)
    assert report["theory"] == pytest.approx(1 / 5)
    (replica,) = report["replicas"]
    for stage in replica["stages"]:
        assert stage["bubble_ms"] == pytest.approx(4.5, abs=1e-3)
        assert stage["bubble_ms"] / stage["compute_ms"] == pytest.approx(1 / 4, abs=1e-3)
        assert stage["bubble"] == pytest.approx(stage["theory"], abs=1e-3)
        assert stage["warmup_cooldown_ms"] == pytest.approx(4.5, abs=1e-3)
        assert stage["stall_ms"] == pytest.approx(0.0, abs=1e-3)
    assert replica["holds_back"] is None


def test_an_interleaved_pipeline_s_warm_up_is_the_other_stages_time_per_microbatch_over_v(
        tmp_path, capsys):
    # The same order, stage 1 twice as slow (forward 2 ms, backward 4 ms; stage 0 1 and 2 ms):
    #   stage 0: F(0,0) 0-1  F(1,0) 1-2  F(0,1) 3-4  F(1,1) 5-6  B(0,1) 11-13  B(1,1) 17-19
    #            B(0,0) 21-23  B(1,0) 25-27
    #   stage 1: F(0,0) 1-3  F(1,0) 3-5  F(0,1) 5-7  B(0,1) 7-11  F(1,1) 11-13  B(1,1) 13-17
    #            B(0,0) 17-21  B(1,0) 21-25
    # Stage 0 idles 15 of 27 ms; its warm-up/cool-down is stage 1's time per microbatch (12 ms
    # through both chunks) / v = 6 ms, the other 9 ms it stalls waiting for stage 1. Stage 1
    # idles 3 ms, stage 0's 6 ms / v: no stall.
    f, b = "forward-compute", "backward-compute"
    timeline = {
        0: [(f, 0, 0, 1, 0), (f, 1, 1, 2, 0), (f, 0, 3, 4, 1), (f, 1, 5, 6, 1), (b, 0, 11, 13, 1),
            (b, 1, 17, 19, 1), (b, 0, 21, 23, 0), (b, 1, 25, 27, 0)],
        1: [(f, 0, 1, 3, 0), (f, 1, 3, 5, 0), (f, 0, 5, 7, 1), (b, 0, 7, 11, 1),
            (f, 1, 11, 13, 1), (b, 1, 13, 17, 1), (b, 0, 17, 21, 0), (b, 1, 21, 25, 0)]}
    in_us = {s: [(t, mb, lo * 1000, hi * 1000, c) for t, mb, lo, hi, c in ops]
             for s, ops in timeline.items()}
    pipeline_job(tmp_path, stages=2, microbatches=2, timeline=in_us, chunks=2)
    code, report = run_cli_json(capsys, "pipeline", tmp_path)
    assert code == 0
    (replica,) = report["replicas"]
    first, second = replica["stages"]
    assert (first["bubble_ms"], first["warmup_cooldown_ms"], first["stall_ms"]) == \
        pytest.approx((15.0, 6.0, 9.0), abs=1e-3)
    assert (second["bubble_ms"], second["warmup_cooldown_ms"], second["stall_ms"]) == \
        pytest.approx((3.0, 3.0, 0.0), abs=1e-3)
    assert replica["holds_back"] == 1


def test_a_slow_stage_is_named_and_its_peers_carry_the_stall(tmp_path, capsys):
    # stage 2's forward takes 3 ms, the others' 1 ms
    pipeline_job(tmp_path, stages=4, microbatches=8, forward_us=[1000, 1000, 3000, 1000])
    code, report = run_cli_json(capsys, "pipeline", tmp_path, "--step", "4")
    assert code == 0 and report["step"] == 4
    (replica,) = report["replicas"]
    stalls = {s["stage"]: s["stall_ms"] for s in replica["stages"]}
    assert replica["holds_back"] == 2
    # the step takes 47 ms (38 balanced): every other stage waits 12 ms beyond its
    # warm-up/cool-down, 2 ms on each of 6 exchanges with the slow stage's pace
    for stage in (0, 1, 3):
        assert stalls[stage] == pytest.approx(12.0, abs=0.01)
    assert stalls[2] == pytest.approx(0.0, abs=0.01)
    code, text, _ = run_cli(capsys, "pipeline", tmp_path)
    assert "stage 2 holds the pipeline back" in text


def test_a_folder_without_marks_is_a_usage_error_naming_the_fix(tmp_path, capsys):
    from output_fixtures.torch_traces import torch_trace

    torch_trace(tmp_path, rank=0, start=3, end=5)
    code, out, err = run_cli(capsys, "pipeline", tmp_path)
    assert code == 2 and out == ""
    assert "holds no pipeline schedule marks" in err and len(err.strip().splitlines()) == 1


def test_steps_marked_without_their_microbatches_are_no_full_bubble_but_a_usage_error(
        tmp_path, capsys):
    # MindSpeed's DualPipeV in 1F1B's place: its step is wrapped (schedule=replaced), its
    # microbatches run through functions of its own; a span with nothing marked in it was
    # reported as a 100 % bubble, all of it "stall"
    from mindspeed_prof.config import schedule_marks as sm

    pipeline_job(tmp_path, stages=2, schedule=sm.REPLACED, microbatch_marks=False)
    code, out, err = run_cli(capsys, "pipeline", tmp_path)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "marked but none of their microbatches" in err and "DualPipeV" in err
    code, out, err = run_cli(capsys, "whatif", tmp_path)
    assert code == 2 and "DualPipeV" in err
    code, out, _ = run_cli(capsys, "summary", tmp_path)
    assert code == 0 and "pipeline bubble" not in out


def test_a_step_no_rank_recorded_is_a_usage_error_naming_the_step_flag(tmp_path, capsys):
    pipeline_job(tmp_path, steps=(3, 4))
    code, _, err = run_cli(capsys, "pipeline", tmp_path, "--step", "9")
    assert code == 2 and err.count("\n") == 1
    assert "--step 9" in err


def test_marks_with_unreadable_times_are_counted_and_the_json_stays_strict(tmp_path, capsys):
    pipeline_job(tmp_path, stages=2)
    trace = next(tmp_path.glob("rank0.*.pt.trace.json"))
    data = json.loads(trace.read_text())
    data["traceEvents"].append({"ph": "X", "name": "forward-compute stage=0 chunk=0 mb=9",
                                "pid": 1, "tid": 1, "ts": "NaN", "dur": 5})
    trace.write_text(json.dumps(data))
    code, out, _ = run_cli(capsys, "pipeline", tmp_path, "--json")
    assert code == 0
    report = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert any("1 schedule mark(s) without a usable timestamp" in n for n in report["notes"])


def test_summary_of_a_pipelined_job_gains_each_stage_s_bubble(tmp_path, capsys):
    pipeline_job(tmp_path, stages=4, microbatches=8, forward_us=[1000, 1000, 3000, 1000])
    code, report = run_cli_json(capsys, "summary", tmp_path)
    assert code == 0
    (replica,) = report["pipeline"]["replicas"]
    assert replica["holds_back"] == 2
    assert [s["stage"] for s in replica["stages"]] == [0, 1, 2, 3]
    code, text, _ = run_cli(capsys, "summary", tmp_path)
    assert "pipeline bubble per stage (1f1b, theory 27.3%" in text


def test_summary_of_a_job_without_pipeline_parallelism_has_no_pipeline_block(tmp_path, capsys):
    from output_fixtures.torch_traces import torch_trace

    torch_trace(tmp_path, rank=0, start=3, end=5)
    code, report = run_cli_json(capsys, "summary", tmp_path)
    assert code == 0 and "pipeline" not in report


def test_the_report_draws_one_step_of_every_stage_and_their_bubbles(tmp_path, capsys):
    pytest.importorskip("plotly")
    from helpers.report_page import read_page

    pipeline_job(tmp_path / "prof", stages=4, microbatches=8, forward_us=[1000, 1000, 3000, 1000])
    code, _, _ = run_cli(capsys, "report", tmp_path / "prof", "-o", tmp_path / "r.html")
    assert code == 0
    page = read_page(tmp_path / "r.html")
    assert "Pipeline" in page.sections
    (chart,) = [f for f in page.figures.values() if f["data"][0].get("orientation") == "h"]
    forward, backward = chart["data"]
    assert (forward["name"], backward["name"]) == ("forward", "backward")
    for trace in (forward, backward):  # every stage's 8 microbatches, labelled 0-7
        for stage in range(4):
            labels = [t for t, y in zip(trace["text"], trace["y"]) if y.startswith(f"stage {stage} ")]
            assert labels == [str(mb) for mb in range(8)]
    # stage 2's forwards take 3 ms, the others' 1 ms
    widths = {y: x for x, y in zip(forward["x"], forward["y"])}
    assert widths["stage 2 (rank 2)"] == pytest.approx(3.0) and widths["stage 0 (rank 0)"] == 1.0
    # the first forward of stage 1 starts when stage 0's ends: one clock for every stage
    starts = [b for b, y in zip(forward["base"], forward["y"]) if y == "stage 1 (rank 1)"]
    assert starts[0] == pytest.approx(1.0)
    bars = [f for f in page.figures.values() if f["data"][0].get("name") == "warm-up/cool-down"]
    assert bars and bars[0]["data"][0]["x"][2] == "dp0 stage 2"


def test_on_an_npu_capture_the_device_copy_of_each_compute_mark_is_the_one_measured(
        tmp_path, capsys):
    # torch_npu writes a range put on the device stream twice: the host's copy when it was
    # issued, the device's (another process row) when the device ran it, here later and shorter
    pipeline_job(tmp_path, stages=2, microbatches=4)
    trace = next(tmp_path.glob("rank0.*.pt.trace.json"))
    data = json.loads(trace.read_text())
    device = [dict(e, pid=2, ts=e["ts"] + 50.0, dur=e["dur"] * 0.9)
              for e in data["traceEvents"] if "-compute " in e["name"]]
    data["traceEvents"] += device
    trace.write_text(json.dumps(data))
    code, report = run_cli_json(capsys, "pipeline", tmp_path)
    assert code == 0
    stage = report["replicas"][0]["stages"][0]
    # 4 x (1 ms forward + 2 ms backward), each 0.9 times as long on the device
    assert stage["compute_ms"] == pytest.approx(0.9 * 12.0, abs=0.01)
