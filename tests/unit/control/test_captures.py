"""Captures by themselves in one process, with the real torch.profiler: a training loop, requests
and RL steps whose unit times a test clock sets (so the rules see exactly the times written
here), and the poll's one collective counted on a stand-in two-rank process group."""

import json

import pytest
import torch.distributed as dist

import mindspeed_prof
from mindspeed_prof import ProfilerConfig
from mindspeed_prof.control import captures, collective_wait
from mindspeed_prof.drivers.inference import RequestDriver
from mindspeed_prof.errors import ConfigError

from helpers.e2e import check
from helpers.traces import manifest, step_ids, torch_traces
from helpers.captures_loop import UnitClock, settings, train


@pytest.fixture
def clock(monkeypatch):
    unit_clock = UnitClock()
    monkeypatch.setattr(captures, "_clock", unit_clock)
    return unit_clock


def windows(save):
    return {w["dir"]: w for w in manifest(save, 0)["windows"]}


def test_a_slow_iteration_is_captured_for_the_next_capture_steps_and_the_manifest_says_why(
        tmp_path, clock):
    train(settings(tmp_path), clock, {12: 0.5})
    [trace] = torch_traces(tmp_path)
    assert trace.startswith(str(tmp_path / "iter_13-15")) and step_ids(trace) == [13, 14, 15]
    why = windows(tmp_path)["iter_13-15"]["trigger"]
    assert why["rule"] == "slow step" and why["unit"] == 12 and why["seen_at"] == 13
    assert why["seconds"] == pytest.approx(0.5) and why["median_s"] == pytest.approx(0.1)
    assert why["ratio"] == pytest.approx(5.0) and why["factor"] == 2.0
    assert why["median_of"] == 8  # iterations 4-11: after the warm-up, before the slow one
    taken = manifest(tmp_path, 0)["captures"]["taken"]
    assert taken == [{"capture": 1, "first": 13, "last": 15, "ranks": [0], "rule": "slow step"}]
    code, report = check(tmp_path)
    assert code == 0, report
    assert "slow step: iteration 12 took 0.5 s" in report["ranks"][0]["runs"][0]["trigger"]


def test_with_a_poll_every_five_iterations_the_capture_starts_at_the_next_poll(tmp_path, clock):
    train(settings(tmp_path, profile_trigger_poll=5), clock, {12: 0.5})
    assert list(windows(tmp_path)) == ["iter_15-17"]
    assert windows(tmp_path)["iter_15-17"]["trigger"]["seen_at"] == 15


def test_a_second_slow_iteration_in_the_cool_down_is_not_captured_and_the_manifest_says_why(
        tmp_path, clock):
    train(settings(tmp_path), clock, {12: 0.5, 18: 0.5, 25: 0.6})
    assert list(windows(tmp_path)) == ["iter_13-15", "iter_26-28"]
    summary = manifest(tmp_path, 0)["captures"]
    assert summary["not_captured"] == 1
    [refused] = summary["not_captured_first"]
    assert refused["unit"] == 18 and refused["why"] == ("cool-down (--profile-capture-cooldown) "
                                                        "until 21")


def test_the_warm_up_and_the_profiled_iterations_are_never_judged(tmp_path, clock):
    # iterations 1-3 (warm-up) and 8-9 (a planned window, with its warm-up 7 and its settling
    # 10-11) are slow by design: none of them is an anomaly
    slow = {n: 0.9 for n in (1, 2, 3, 7, 8, 9, 10, 11)}
    train(settings(tmp_path, profile_steps="8-9"), clock, slow)
    assert list(windows(tmp_path)) == ["iter_8-9"]
    assert manifest(tmp_path, 0)["captures"]["taken"] == []
    seen = manifest(tmp_path, 0)["captures"]["ratios_seen"]["slow step"]
    assert seen["judged"] > 0 and seen["largest"] == pytest.approx(1.0)


def test_after_the_last_capture_nothing_is_judged_any_more(tmp_path, clock):
    train(settings(tmp_path, profile_max_captures=1), clock, {12: 0.5, 25: 0.9})
    summary = manifest(tmp_path, 0)["captures"]
    assert [t["first"] for t in summary["taken"]] == [13]
    assert summary["not_captured"] == 0  # 25 was never judged: the poll had ended
    # iterations 4-8 make the median's first five units; 9-12 were judged, then the poll ended
    assert summary["ratios_seen"]["slow step"]["judged"] == 4


def test_a_capture_ends_with_training_and_before_a_planned_window(tmp_path, clock):
    train(settings(tmp_path, profile_steps="20-21", profile_capture_steps=5), clock,
          {12: 0.5, 26: 0.5}, iterations=28)
    # 13-17 fits; the planned window warms up at 19; the second one runs into the end
    assert list(windows(tmp_path)) == ["iter_13-17", "iter_20-21", "iter_27-28"]


def test_slow_requests_are_captured_as_the_next_requests_each_in_its_own_folder(tmp_path, clock):
    driver = RequestDriver(settings(tmp_path))
    driver.arm()
    for n in range(1, 21):
        with driver.request():
            clock.now += 0.4 if n == 10 else 0.05
    driver.close()
    found = windows(tmp_path)
    assert list(found) == ["req_11-11", "req_12-12", "req_13-13"]
    assert all(w["trigger"]["rule"] == "slow step" and w["trigger"]["unit"] == 10
               for w in found.values())
    code, report = check(tmp_path)
    assert code == 0, report
    assert "request 10 took 0.4 s" in report["ranks"][0]["runs"][0]["trigger"]


def test_a_slow_rl_step_of_a_role_is_captured_as_its_next_rl_steps(tmp_path, clock):
    config = {"profile": True, "profile_backend": "torch", "profile_save_path": str(tmp_path),
              "profile_on_slow_step": 2.0, "profile_trigger_poll": 1,
              "profile_capture_warmup": 3, "profile_capture_steps": 2}
    prof = mindspeed_prof.role_profiler("actor", config, rank=0, world_size=1, total_steps=20)
    for g in range(1, 21):
        with prof.step(g):
            clock.now += 1.5 if g == 9 else 0.3
    prof.close()
    assert [w["dir"] for w in manifest(tmp_path / "actor", 0)["windows"]] == [
        "step_10-10", "step_11-11"]
    assert check(tmp_path / "actor")[0] == 0


def test_a_capture_rule_with_profile_stages_is_refused_naming_the_flag(tmp_path):
    config = {"profile": True, "profile_backend": "torch", "profile_save_path": str(tmp_path),
              "profile_on_slow_step": 2.0, "profile_stages": ["update"]}
    with pytest.raises(ConfigError, match=r"role 'actor': --profile-on-slow-step judges the "
                                          r"time of whole RL steps.*drop profile_stages"):
        mindspeed_prof.role_profiler("actor", config, rank=0, world_size=1)


def test_the_straggler_rule_in_a_one_rank_job_says_it_never_captures(tmp_path, clock):
    train(settings(tmp_path, profile_on_slow_step=None, profile_on_straggler=1.5), clock, {})
    warnings = [w["message"] for w in manifest(tmp_path, 0)["warnings"]]
    assert any("--profile-on-straggler needs more than one rank" in w for w in warnings)
    assert manifest(tmp_path, 0)["captures"]["taken"] == []


# -- the poll's one collective, on a stand-in two-rank group ------------------------------------


class TwoRanks:
    """torch.distributed as rank 0 of a two-rank gloo job sees it; rank 1 contributes
    ``other`` to every all-gather. Counts every collective the poll could make."""

    def __init__(self, monkeypatch, other=None):
        self.broadcasts = self.gathers = self.others = 0
        self.other = other or {}
        monkeypatch.setattr(dist, "is_initialized", lambda: True)
        monkeypatch.setattr(dist, "get_backend", lambda group=None: "gloo")
        monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)
        monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
        monkeypatch.setattr(dist, "broadcast", self.broadcast)
        monkeypatch.setattr(dist, "all_gather", self.all_gather)
        for name in ("broadcast_object_list", "all_gather_object", "all_reduce", "barrier",
                     "all_gather_into_tensor"):
            monkeypatch.setattr(dist, name, self.another)

    def broadcast(self, tensor, src=0, group=None, async_op=False):
        self.broadcasts += 1  # rank 0 is the source: its tensor is what every rank gets

    def all_gather(self, rows, tensor, group=None, async_op=False):
        import torch

        from mindspeed_prof.control import exchange

        self.gathers += 1
        rows[0].copy_(tensor)
        rows[1].copy_(exchange._pack(torch, exchange._encode(self.other), tensor.numel(),
                                     tensor.device))

    def another(self, *args, **kwargs):
        self.others += 1


def two_rank_loop(config, clock, iterations=20, times=None):
    times = times or {}
    with mindspeed_prof.profile(config, rank=0, world_size=2, train_iters=iterations) as prof:
        for n in range(1, iterations + 1):
            clock.now += times.get(n, 0.1)
            prof.step()
    return prof


# 21 polls: the loop begins iterations 1-21 (the 21st is begun by the last step() and
# retracted), and the poll runs at each begin (--profile-trigger-poll 1).
@pytest.mark.parametrize("knobs, broadcasts, gathers", [
    ({"profile_on_slow_step": None}, 0, 0),
    ({"profile_on_slow_step": None, "profile_trigger_file": "T"}, 21, 0),
    ({"profile_trigger_file": "T"}, 21, 0),
    ({}, 21, 0),
    ({"profile_on_slow_step": None, "profile_on_straggler": 1.5}, 0, 21),
    ({"profile_on_straggler": 1.5, "profile_trigger_file": "T"}, 0, 21),
    ({"profile_max_gb": 10.0}, 0, 21),  # every rank's room for a capture is shared
])
def test_every_poll_makes_exactly_one_collective_whichever_rules_are_on(
        tmp_path, clock, monkeypatch, knobs, broadcasts, gathers):
    group = TwoRanks(monkeypatch, other={"number": 0.1})
    if knobs.get("profile_trigger_file"):
        knobs["profile_trigger_file"] = str(tmp_path / "trigger.json")
    two_rank_loop(settings(tmp_path / "prof", profile_max_captures=5, **knobs), clock)
    assert (group.broadcasts, group.gathers, group.others) == (broadcasts, gathers, 0)


def test_a_straggler_among_two_ranks_is_captured_with_this_rank_as_its_reference(
        tmp_path, clock, monkeypatch):
    group = TwoRanks(monkeypatch, other={"number": 0.5, "units": [6, 6]})
    two_rank_loop(settings(tmp_path, profile_on_slow_step=None, profile_on_straggler=1.5,
                           profile_max_captures=1), clock)
    [window] = manifest(tmp_path, 0)["windows"]
    why = window["trigger"]
    assert window["dir"] == "iter_6-8" and why["rule"] == "straggler"
    assert (why["straggler"], why["reference"], why["this_rank"]) == (1, 0, "reference")
    assert why["per_rank_s"] == {"0": 0.1, "1": 0.5} and why["ratio"] == 5.0
    assert why["measure"] == "compute time: unit time minus time waiting in collectives"
    # polls 5 and 6 found rank 1 beyond the factor (two in a row); with the one capture
    # allowed taken, every rank stops polling at once: no all-gather after iteration 6
    assert group.gathers == 6


def test_after_the_last_capture_work_wait_is_put_back_before_the_run_ends(
        tmp_path, clock, monkeypatch):
    from torch._C._distributed_c10d import Work

    original = Work.wait
    TwoRanks(monkeypatch, other={"number": 0.5})
    config = settings(tmp_path, profile_on_slow_step=None, profile_on_straggler=1.5,
                      profile_max_captures=1)
    timed = []
    with mindspeed_prof.profile(config, rank=0, world_size=2, train_iters=20) as prof:
        for n in range(1, 21):
            clock.now += 0.1
            timed.append(Work.wait is not original)
            prof.step()
    # the capture was agreed at the poll of iteration 6, before its work ran
    assert timed[:5] == [True] * 5 and timed[5:] == [False] * 15


def test_work_wait_is_timed_only_with_the_straggler_rule_and_put_back_at_close(
        tmp_path, clock, monkeypatch):
    from torch._C._distributed_c10d import Work

    original = Work.wait
    TwoRanks(monkeypatch, other={"number": 0.1})
    config = settings(tmp_path, profile_on_slow_step=None, profile_on_straggler=1.5)
    with mindspeed_prof.profile(config, rank=0, world_size=2, train_iters=5) as prof:
        assert Work.wait is not original
        prof.step()
    assert Work.wait is original
    with mindspeed_prof.profile(settings(tmp_path / "spike"), rank=0, world_size=2,
                                train_iters=5) as prof:
        assert Work.wait is original  # the slow-step rule times units, not collectives
        prof.step()
    assert collective_wait.waited() == 0.0


def test_a_trigger_request_during_a_capture_is_ignored_and_one_after_it_says_it_was_requested(
        tmp_path, clock):
    from mindspeed_prof.control import trigger

    request_file = tmp_path / "trigger.json"
    config = settings(tmp_path / "prof", profile_trigger_file=str(request_file))
    with mindspeed_prof.profile(config, train_iters=30) as prof:
        for n in range(1, 31):
            clock.now += 0.5 if n == 12 else 0.1
            if n in (14, 20):  # read at the polls of 15 (inside the capture) and 21
                trigger.write_request(str(request_file), steps=2)
            prof.step()
    found = windows(tmp_path / "prof")
    assert list(found) == ["iter_13-15", "iter_22-23"]
    assert found["iter_22-23"]["trigger"]["rule"] == "request"
    warnings = [w["message"] for w in manifest(tmp_path / "prof", 0)["warnings"]]
    assert any("ignored at iteration 15: a window is still running" in w for w in warnings)


def test_a_capture_the_disk_budget_has_no_room_for_is_refused_and_takes_no_slot(
        tmp_path, clock, capsys):
    # each capture of 3 iterations is estimated at 30 MB (torch: 10 MB an iteration); the share
    # holds the first one exactly, and the first trace's own bytes leave room for 2 more only
    config = settings(tmp_path, profile_max_gb=0.030001, profile_max_captures=5)
    train(config, clock, {12: 0.5, 25: 0.5, 33: 0.5}, iterations=40)
    assert list(windows(tmp_path)) == ["iter_13-15"]
    summary = manifest(tmp_path, 0)["captures"]
    assert summary["taken"] == [{"capture": 1, "first": 13, "last": 15, "ranks": [0],
                                 "rule": "slow step"}]
    assert summary["not_captured"] == 2
    refused = summary["not_captured_first"]
    assert [r["unit"] for r in refused] == [25, 33]
    assert all("could not record its 3 iterations: its share of --profile-max-gb 0.030001 "
               "holds 2 more iterations" in r["why"] for r in refused)
    out = capsys.readouterr().out
    assert "capture 1/5" in out and "capture 2/5" not in out
    assert "not captured at iteration 26 (rank(s) 0 could not record" in out
    code, report = check(tmp_path)
    assert code == 0, report


def test_a_straggler_capture_the_other_ranks_budget_has_no_room_for_is_refused_on_every_rank(
        tmp_path, clock, monkeypatch):
    TwoRanks(monkeypatch, other={"number": 0.5, "units": [6, 6],
                                 "room": [1, "its share of --profile-max-gb 1 holds 1 more "
                                             "iteration"]})
    two_rank_loop(settings(tmp_path, profile_on_slow_step=None, profile_on_straggler=1.5,
                           profile_max_gb=1.0, profile_max_captures=1), clock)
    summary = manifest(tmp_path, 0)["captures"]
    # refused from 6 on (no slot used); at 20 one iteration is left before the end: it fits
    assert [w["dir"] for w in manifest(tmp_path, 0)["windows"]] == ["iter_20-20"]
    assert [t["first"] for t in summary["taken"]] == [20]
    assert summary["not_captured_first"][0]["seen_at"] == 6
    assert summary["not_captured_first"][0]["why"] == (
        "rank(s) 1 could not record its 3 iterations: its share of --profile-max-gb 1 holds 1 "
        "more iteration")
