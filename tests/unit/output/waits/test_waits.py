"""Who makes everyone wait (output/waits): in a synchronous job every rank's step time is the
same; the slow rank shows as the others' wait in its collectives, named with its place in the
layout, its group and its reason."""

import json
import os

import pytest

from helpers.cli import assert_merge_refuses, run_cli, run_cli_json
from mindspeed_prof.layout import TORCH_TRACE_TEMPLATE
from mindspeed_prof.output.summary import torchtrace
from mindspeed_prof.output.waits import Layout
from output_fixtures.simulated_job import COMPUTE_US, simulated_job


def test_the_slow_rank_of_a_1024_rank_synchronous_job_is_the_one_the_others_wait_for(
        tmp_path, capsys):
    directory = simulated_job(str(tmp_path / "prof"), ranks=1024, slow={77: "compute"}, tp=8,
                              hosts=8)
    code, data = run_cli_json(capsys, "summary", directory)
    assert code == 0
    # the fixture is a synchronous job: rank 77's step is everyone's
    assert len({r["step_time_us"] for r in data["ranks"]}) == 1
    [slow] = [s for s in data["slow_ranks"] if s["slow"]]
    assert (slow["rank"], slow["place"], slow["reason"]) == (77, "tp5 pp0 dp9", "compute-bound")
    assert slow["grew"]["what"] == "aten::mm" and slow["grew"]["pct"] == pytest.approx(200.0)
    assert slow["deviation_pct"] == 0.0  # step time cannot tell: it stays a secondary column
    assert slow["line"].startswith("rank 77 · tp5 pp0 dp9 — ")
    waits = data["waits"]
    # its DP group (dp5: the ranks of tp coordinate 5) waited 2 x 800 us per step for it
    [row] = [r for r in waits["ranks"] if r["rank"] == 77]
    assert row["arrived_last"] == 3 and row["own_wait_us"] == 0.0
    assert {g["group"] for g in waits["groups"]} == {f"dp{i}" for i in range(8)} | {"world"}
    dp5 = next(g for g in waits["groups"] if g["group"] == "dp5")
    assert dp5["wait_us"] == pytest.approx(3 * 127 * 2 * COMPUTE_US)
    code, text, _ = run_cli(capsys, "summary", directory)
    assert "Slow ranks: the ranks others wait for" in text and "rank 77 · tp5 pp0 dp9" in text


def test_a_host_bound_rank_and_a_slow_link_are_told_apart(tmp_path, capsys):
    directory = simulated_job(str(tmp_path / "prof"), ranks=8, slow={6: "free", 2: "comm"},
                              tp=2, hosts=4)
    _, data = run_cli_json(capsys, "summary", directory)
    slow = {s["rank"]: s for s in data["slow_ranks"] if s["slow"]}
    assert list(slow) == [6] and slow[6]["reason"] == "host-bound"
    assert slow[6]["grew"] == {"what": "host time outside operators",
                               "us_per_step": pytest.approx(2 * COMPUTE_US)}
    groups = {g["group"]: g for g in data["waits"]["groups"]}
    # rank 2's DP group moves its bytes 3x slower than the other DP group: a slow link
    assert groups["dp0"]["slow_link"] == [{"bytes": 1 << 20, "transfer_us": 900.0,
                                           "peers_us": 300.0}]
    assert not groups["dp1"]["slow_link"]
    assert groups["dp0"]["bandwidth_gbps"] == pytest.approx((1 << 20) / 900.0 / 1e3)


def test_a_calm_synchronous_job_names_no_slow_rank(tmp_path, capsys):
    directory = simulated_job(str(tmp_path / "prof"), ranks=16, tp=2, hosts=8)
    _, data = run_cli_json(capsys, "summary", directory)
    assert not any(s["slow"] for s in data["slow_ranks"])
    code, text, _ = run_cli(capsys, "summary", directory)
    assert code == 0 and "Slow ranks: none (no rank made the other members" in text


STEPS = tuple(range(5, 13))
# rank 3's stall each step: late in every step, by 0.3x to 2.2x a host-bound rank's stall
UNEVEN = [0.3, 2.0, 0.35, 1.8, 0.3, 2.2, 0.4, 1.9]


def test_a_rank_late_in_every_step_by_uneven_amounts_is_named_slow(tmp_path, capsys):
    """Its median wait (1.0x) is smaller than 5 times its spread over the steps (0.8x), the
    steadiness a step-to-step noise lacks; but the others waited for it in every step, past
    10 % of the step: a data loader or a collector that stalls it by another amount each step
    is a slow rank all the same."""
    directory = simulated_job(str(tmp_path / "prof"), ranks=8, steps=STEPS, tp=2, hosts=4,
                              stalls={3: UNEVEN})
    _, data = run_cli_json(capsys, "summary", directory)
    [slow] = [s for s in data["slow_ranks"] if s["slow"]]
    assert (slow["rank"], slow["reason"]) == (3, "host-bound")
    [row] = [r for r in data["waits"]["ranks"] if r["rank"] == 3]
    assert row["median_delay_us"] < 5 * row["delay_spread_us"]  # the spread rule alone: none
    assert row["late_steps"] == len(STEPS)


def test_stalls_that_move_from_rank_to_rank_name_no_slow_rank(tmp_path, capsys):
    """A busy host's noise: each step another rank stalls (as long as the uneven rank's
    longest): every rank was waited for in one step of eight, none is slow."""
    directory = simulated_job(str(tmp_path / "prof"), ranks=8, steps=STEPS, tp=2, hosts=4,
                              stalls={r: [2.2 if i == r else 0.0 for i in range(len(STEPS))]
                                      for r in range(8)})
    _, data = run_cli_json(capsys, "summary", directory)
    assert not any(s["slow"] for s in data["slow_ranks"])
    assert max(r["late_steps"] for r in data["waits"]["ranks"]) == 1


def test_a_host_whose_clock_is_seconds_off_keeps_its_slow_ranks_lateness(tmp_path, capsys):
    # ranks 4-7 share a host whose clock is 3 s ahead; rank 5 on it computes 3x longer
    directory = simulated_job(str(tmp_path / "prof"), ranks=8, slow={5: "compute"}, hosts=4,
                              skew_us={1: 3_000_000.0})
    _, data = run_cli_json(capsys, "summary", directory)
    clocks = data["waits"]["clocks"]
    assert clocks["clocks"] == "per host"
    assert {r: clocks["offsets_us"][str(r)] for r in range(8)} == {
        **{r: 0.0 for r in range(4)}, **{r: -3_000_000.0 for r in range(4, 8)}}
    assert clocks["basis"]["5"] == "collective ends" and clocks["uncertainty_us"]["5"] < 1.0
    late = data["waits"]["lateness"]
    # the lateness stays rank 5's: 1.6 ms at each step's all-reduce, none absorbed by a clock
    assert late["us"] == [[0.0] * 3] * 5 + [[2 * COMPUTE_US] * 3] + [[0.0] * 3] * 2
    [slow] = [s for s in data["slow_ranks"] if s["slow"]]
    assert slow["rank"] == 5 and slow["reason"] == "compute-bound"


def test_one_late_rank_does_not_move_its_hosts_clock(tmp_path, capsys):
    # every rank on its own host (no manifests: each rank its own clock); rank 3 computes
    # longer: its offset comes from collective ends, so its lateness is not absorbed
    directory = simulated_job(str(tmp_path / "prof"), ranks=4, slow={3: "compute"})
    _, data = run_cli_json(capsys, "summary", directory)
    clocks = data["waits"]["clocks"]
    assert clocks["clocks"] == "per rank"
    assert set(clocks["offsets_us"].values()) == {0.0}
    assert data["waits"]["lateness"]["us"][3][0] > 0.0


def _trace(path, rank, events):
    with open(path / TORCH_TRACE_TEMPLATE.format(rank=rank, time_ns=1_000 + rank), "w") as f:
        json.dump({"traceEvents": events}, f)


def test_a_collective_inside_an_autograd_op_is_communication_not_overlap(tmp_path):
    """Megatron's _ReduceFromModelParallelRegion wraps its all-reduce on the same thread: the
    time inside the collective is communication, not compute overlapping it."""
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
            "ts": 0.0, "dur": 1000.0}
    region = {"ph": "X", "cat": "cpu_op", "name": "_ReduceFromModelParallelRegion", "pid": 1,
              "tid": 1, "ts": 100.0, "dur": 500.0}
    reduce = {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1,
              "ts": 150.0, "dur": 400.0}
    _trace(tmp_path, 0, [step, region, reduce])
    [path] = [tmp_path / f for f in os.listdir(tmp_path)]
    parts = torchtrace.summarize_trace(str(path)).breakdown[1]
    assert parts["Overlapped"] == 0.0
    assert parts["Communication(Not Overlapped)"] == 400.0
    assert parts["Computing"] == 100.0
    assert parts["Free"] == 500.0


def test_groups_are_named_by_the_layout_never_by_id():
    layout = Layout.from_manifests({r: {"tensor_model_parallel_size": 2,
                                        "pipeline_model_parallel_size": 2,
                                        "data_parallel_size": 2, "context_parallel_size": 1,
                                        "world_size": 8} for r in range(8)})
    assert layout.place(5) == "tp1 pp1 dp0"
    assert layout.group_name({4, 6}) == "dp2"  # pp1's DP group of tp0
    assert layout.group_name({2, 3}) == "tp1"
    assert layout.group_name({1, 5}) == "pp1"
    assert layout.group_name(range(8)) == "world"
    assert layout.group_name({0, 7}) == "ranks 0,7"
    assert Layout().group_name({0, 1, 2}) == "ranks 0-2"


def test_a_tp_pp_dp_mapping_recorded_in_the_manifests_places_ranks_by_it():
    # Megatron's --use-tp-pp-dp-mapping: rank = tp + TP * (pp + PP * dp)
    parallel = {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2,
                "data_parallel_size": 2, "context_parallel_size": 1, "world_size": 8,
                "order": "tp-pp-dp"}
    layout = Layout.from_manifests({r: parallel for r in range(8)})
    assert layout.place(2) == "tp0 pp1 dp0" and layout.place(5) == "tp1 pp0 dp1"
    assert layout.group_name({0, 2}) == "pp0" and layout.group_name({1, 5}) == "dp1"
    assert layout.as_dict()["order"] == "tp-pp-dp"
    # the recording side writes the order Megatron initialised its groups with
    from types import SimpleNamespace

    from mindspeed_prof.patches.topology import distributed_args
    args = SimpleNamespace(tensor_model_parallel_size=2, pipeline_model_parallel_size=2,
                           data_parallel_size=2, use_tp_pp_dp_mapping=True)
    assert distributed_args(args, 0, 8)["order"] == "tp-pp-dp"
    args.use_tp_pp_dp_mapping = False
    assert distributed_args(args, 0, 8)["order"] == "tp-cp-ep-dp-pp"
    # an order we cannot place ranks by: no layout rather than a wrong one
    odd = Layout.from_manifests({r: {**parallel, "order": "pp-tp-dp"} for r in range(8)})
    assert not odd.known and odd.group_name({0, 2}) == "ranks 0,2"


def test_npu_captures_of_a_1024_rank_job_name_the_slow_rank_from_communication_json(
        tmp_path, capsys):
    from output_fixtures.simulated_npu_job import npu_job

    # ranks 600-607 share a host whose clock is 2 s behind; rank 601 computes 3x longer
    directory = npu_job(str(tmp_path / "prof"), ranks=1024, slow={601: "compute"}, tp=8,
                        hosts=8, skew_us={75: -2_000_000.0})
    code, data = run_cli_json(capsys, "summary", directory)
    assert code == 0 and len({r["step_time_us"] for r in data["ranks"]}) == 1
    waits = data["waits"]
    assert waits["backend"] == "npu"
    # the HCCL groups are named by the layout from the ranks holding each hash, never by it
    assert {g["group"] for g in waits["groups"]} == {f"dp{i}" for i in range(8)} | {"world"}
    [slow] = [s for s in data["slow_ranks"] if s["slow"]]
    assert (slow["rank"], slow["place"], slow["reason"]) == (601, "tp1 pp0 dp75",
                                                             "compute-bound")
    offsets = waits["clocks"]["offsets_us"]
    assert {offsets[str(r)] for r in range(600, 608)} == {2_000_000.0}
    assert {offsets[str(r)] for r in range(0, 600)} == {0.0}
    # 1.6 ms late at its DP all-reduce and, never having waited, at the world's
    assert waits["lateness"]["us"][601] == [2 * 2 * COMPUTE_US] * 3


def test_the_real_ascend_samples_match_their_collectives_and_state_the_clocks(tmp_path,
                                                                            capsys):
    from output_fixtures import samples

    samples.two_ranks(tmp_path)
    _, data = run_cli_json(capsys, "summary", tmp_path)
    waits = data["waits"]
    assert waits["backend"] == "npu" and waits["collectives"] == 25
    clocks = waits["clocks"]
    # two ranks of one real job: their clocks agree to a few tens of µs, and that is said
    assert abs(clocks["offsets_us"]["1"]) < 100 and clocks["uncertainty_us"]["1"] < 100
    assert clocks["basis"]["1"] == "collective ends"


def _shift_step_starts(directory, rank, by_us):
    """Move the start of rank ``rank``'s ProfilerStep markers later by ``by_us`` (their ends
    stay): its step boundaries now disagree with its collectives by a lateness of its own."""
    [name] = [f for f in os.listdir(directory) if f.startswith(f"rank{rank}.")]
    path = os.path.join(directory, name)
    with open(path) as handle:
        trace = json.load(handle)
    for event in trace["traceEvents"]:
        if event.get("name", "").startswith("ProfilerStep#"):
            event["ts"] += by_us
            event["dur"] -= by_us
    with open(path, "w") as handle:
        json.dump(trace, handle)


def test_timeline_aligns_clocks_on_collective_ends_never_on_a_ranks_lateness(
        tmp_path, capsys, monkeypatch):
    import gzip

    from mindspeed_prof.output import cache

    monkeypatch.setattr(cache, "_disabled", False)  # an earlier --no-cache in this process
    monkeypatch.setattr(cache, "MIN_BYTES", 0)  # these small traces are remembered too
    monkeypatch.setattr(cache, "RACY_SECONDS", 0.0)
    # no manifests: each rank its own clock. Rank 3's step markers start 1 ms late (its own
    # lateness, on a clock that is right): step boundaries would call half of it clock error
    directory = simulated_job(str(tmp_path / "prof"), ranks=4, slow={3: "compute"})
    _shift_step_starts(directory, 3, 1000.0)
    out = str(tmp_path / "t.json.gz")
    code, printed, _ = run_cli(capsys, "timeline", directory, "-o", out)
    assert code == 0
    with gzip.open(out, "rt") as handle:
        meta = json.load(handle)["mindspeed_prof"]
    # timeline run first (no summary before it) reads the collectives itself: the steps'
    # median would have taken half of rank 3's lateness for clock error (-500 µs)
    assert meta["aligned_on"].startswith("ends of the collectives every member leaves together")
    assert meta["offsets_us"] == {"0": 0.0, "1": 0.0, "2": 0.0, "3": 0.0}
    assert "offsets are clock error; lateness between ranks is skew" in printed
    assert run_cli(capsys, "summary", directory)[0] == 0  # from what timeline remembered
    assert run_cli(capsys, "timeline", directory, "-o", out)[0] == 0
    with gzip.open(out, "rt") as handle:
        assert json.load(handle)["mindspeed_prof"]["offsets_us"] == meta["offsets_us"]


def test_ranks_of_one_host_share_its_clock_and_timeline_reads_no_collective_for_it(
        tmp_path, capsys, monkeypatch):
    import gzip

    from mindspeed_prof.output.summary import torchtrace

    directory = simulated_job(str(tmp_path / "prof"), ranks=4, hosts=4, slow={3: "compute"})  # 4 a host
    _shift_step_starts(directory, 3, 1000.0)
    read = []
    real = torchtrace.remembered_summary
    monkeypatch.setattr(torchtrace, "remembered_summary",
                        lambda path: read.append(path) or real(path))
    out = str(tmp_path / "t.json.gz")
    assert run_cli(capsys, "timeline", directory, "-o", out)[0] == 0
    with gzip.open(out, "rt") as handle:
        meta = json.load(handle)["mindspeed_prof"]
    assert read == [] and meta["clocks"] == "per host"
    assert meta["offsets_us"] == {"0": 0.0, "1": 0.0, "2": 0.0, "3": 0.0}


def test_the_terminal_lists_sixteen_slow_ranks_and_counts_the_rest(tmp_path, capsys):
    # 32 DP groups of two ranks; the first rank of 20 of them computes 3x longer
    directory = simulated_job(str(tmp_path / "prof"), ranks=64, tp=32, hosts=8,
                              slow={r: "compute" for r in range(20)})
    _, data = run_cli_json(capsys, "summary", directory)
    assert sorted(s["rank"] for s in data["slow_ranks"] if s["slow"]) == list(range(20))
    _, text, _ = run_cli(capsys, "summary", directory)
    assert sum(1 for line in text.splitlines() if " · tp" in line and " — " in line) == 16
    assert "... and 4 more slow rank(s) (summary --json lists every one)" in text


def test_a_node_report_with_malformed_collectives_or_places_is_refused_naming_the_field(
        tmp_path, capsys):

    directory = simulated_job(str(tmp_path / "prof"), ranks=2, slow={1: "compute"}, hosts=1)
    report = tmp_path / "node.json"
    run_cli(capsys, "check", directory, "--node", "0/1", "--report", report)
    good = json.loads(report.read_text())
    assert good["summary"]["ranks"][0]["collectives"] and good["summary"]["places"]["1"]
    code, merged = run_cli_json(capsys, "merge", report)
    # the merge finds the job's waits from the reports, as one machine does
    assert [s["rank"] for s in merged["summary"]["slow_ranks"] if s["slow"]] == [1]
    damage = {"summary.ranks[0].collectives[0] is": lambda d: d["summary"]["ranks"][0].update(
                  collectives=[[5, "c10d::allreduce_", "", None, "soon", 1.0]]),
              "summary.ranks[0].spans[0] is": lambda d: d["summary"]["ranks"][0].update(
                  spans=[[5, 1.0]]),
              "summary.places has": lambda d: d["summary"].update(places={"x": 5})}
    assert_merge_refuses(capsys, tmp_path, good, damage)
