"""Collectives whose traces name no group (gloo on the CPU): placed in the layout's groups by the
range they ran in, else by what the layout and their ends allow, else not matched and counted;
and a rank late only from waiting earlier in its step is not the one the others wait for."""

import pytest

from helpers.cli import run_cli, run_cli_json
from mindspeed_prof.output.summary.collectives import scope_of
from output_fixtures.gloo_groups_job import LAYERS, STALL_US, gloo_groups_job

STEPS = (3, 4, 5, 6, 7)


def test_a_stalled_rank_of_a_gloo_tp2_dp2_job_is_named_and_its_lockstep_tp_peer_is_not(
        tmp_path, capsys):
    directory = gloo_groups_job(str(tmp_path / "prof"), tp=2, dp=2, steps=STEPS,
                                slow={2: "free"})
    code, data = run_cli_json(capsys, "summary", directory)
    assert code == 0
    assert len({r["step_time_us"] for r in data["ranks"]}) == 1  # a synchronous job
    # rank 3 waited for rank 2 at the step's broadcast, then arrived as late at its own DP
    # group's all-reduce: that lateness is rank 2's, and rank 3 is not named
    [slow] = [s for s in data["slow_ranks"] if s["slow"]]
    assert (slow["rank"], slow["place"], slow["reason"]) == (2, "tp0 pp0 dp1", "host-bound")
    assert slow["grew"]["what"] == "host time outside operators"
    assert slow["line"].startswith("rank 2 · tp0 pp0 dp1 — 100 % of ")
    waits = data["waits"]
    made = {r["rank"]: r["made_wait_us"] for r in waits["ranks"]}
    # rank 3 at the broadcast, rank 0 in dp0 (rank 2's own), rank 1 in dp1 (behind rank 3)
    assert made[2] == pytest.approx(3 * STALL_US * len(STEPS), rel=0.01)
    assert made[3] < 0.001 * made[2] and made[1] < 0.001 * made[2]
    groups = {(g["group"], g["kind"]): g for g in waits["groups"]}
    # the pairs of each kind, by the ranges (TP autograd ops, the grads-all-reduce mark) and
    # the broadcast by its ends; no 3-rank or world groups made up from finishing times
    assert set(groups) == {("tp0", "broadcast"), ("tp1", "broadcast"), ("tp0", "all-reduce"),
                           ("tp1", "all-reduce"), ("dp0", "all-reduce"),
                           ("dp1", "all-reduce")}
    assert groups[("tp0", "all-reduce")]["count"] == 2 * LAYERS * len(STEPS)
    for name in ("dp0", "dp1"):
        assert groups[(name, "all-reduce")]["count"] == len(STEPS)
        assert groups[(name, "all-reduce")]["wait_us"] == pytest.approx(STALL_US * len(STEPS),
                                                                        rel=0.01)
    assert all(s["rank"] == 2 for s in waits["per_step"])
    # the world all-reduce leaves together on every rank: one collective or two pairs in
    # lockstep, the files cannot tell: not matched, and said
    assert waits["unplaced_calls"] == 4 * len(STEPS)
    code, text, _ = run_cli(capsys, "summary", directory)
    assert "rank 2 · tp0 pp0 dp1" in text and "rank 3 ·" not in text
    assert "20 collective call(s) not placed in a group" in text


def test_a_calm_gloo_job_names_no_rank_and_counts_what_it_could_not_place(tmp_path, capsys):
    directory = gloo_groups_job(str(tmp_path / "prof"), steps=STEPS)
    _, data = run_cli_json(capsys, "summary", directory)
    assert not any(s["slow"] for s in data["slow_ranks"])
    waits = data["waits"]
    assert not waits["slow_ranks"]
    # the broadcasts (in no narrower range) and the world all-reduce end together on all four
    assert waits["unplaced_calls"] == 2 * 4 * len(STEPS)
    assert {g["group"] for g in waits["groups"]} == {"tp0", "tp1", "dp0", "dp1"}


def test_a_compute_bound_tp_rank_is_named_from_its_tp_and_dp_groups(tmp_path, capsys):
    directory = gloo_groups_job(str(tmp_path / "prof"), steps=STEPS, slow={1: "compute"})
    _, data = run_cli_json(capsys, "summary", directory)
    [slow] = [s for s in data["slow_ranks"] if s["slow"]]
    assert (slow["rank"], slow["place"], slow["reason"]) == (1, "tp1 pp0 dp0", "compute-bound")
    assert slow["grew"]["what"] == "aten::mm"
    made = {r["rank"]: r["made_wait_us"] for r in data["waits"]["ranks"]}
    # rank 0 waited for rank 1 in their TP pair, then kept rank 2 waiting in dp0: not its own
    assert made[0] < 0.01 * made[1]


@pytest.mark.parametrize("name, kind", [
    ("_ReduceFromModelParallelRegion", "tp"),
    ("autograd::engine::evaluate_function: _ReduceFromModelParallelRegionBackward", "tp"),
    ("LinearWithGradAccumulationAndAsyncCommunicationBackward", "tp"),
    ("_VocabParallelCrossEntropy", "tp"),
    ("_GatherFromSequenceParallelRegion", "tp"),
    ("grads-all-reduce stage=0", "dp"),
    ("grads-reduce-scatter stage=1", "dp"),
    ("params-all-gather stage=0", "dp"),
    ("forward-send stage=0 chunk=0 mb=3 peer=1", "pp"),
    ("backward-send-forward-recv stage=1 chunk=0 mb=2 peer=0", "pp"),
    ("forward-compute stage=0 chunk=0 mb=0", None),
    ("aten::mm", None),
])
def test_the_ranges_that_name_a_collectives_group_are_megatrons_and_the_schedule_marks(
        name, kind):
    assert scope_of(name) == kind


def test_a_stalled_rank_among_64_tp8_dp8_is_named_alone_and_host_bound(tmp_path, capsys):
    # its TP group's broadcast ends 50 ms after the other seven's: that part is one TP group,
    # the rest seven, so its seven peers' wait there is matched, and their lateness at their
    # own DP groups' all-reduces after it is rank 27's
    directory = gloo_groups_job(str(tmp_path / "prof"), tp=8, dp=8, steps=STEPS,
                                slow={27: "free"}, per_host=8)
    _, data = run_cli_json(capsys, "summary", directory)
    slow = [s for s in data["slow_ranks"] if s["slow"]]
    assert [(s["rank"], s["place"], s["reason"]) for s in slow] == [
        (27, "tp3 pp0 dp3", "host-bound")], [s["line"] for s in slow]
    # the breakdown's +50 ms explains its own lateness (the broadcast, its DP group), not the
    # same lateness passed on to the other seven DP groups
    assert slow[0]["grew"]["us_per_step"] == pytest.approx(STALL_US)
    groups = {g["group"] for g in data["waits"]["groups"]}
    assert groups == {f"tp{i}" for i in range(8)} | {f"dp{i}" for i in range(8)}
