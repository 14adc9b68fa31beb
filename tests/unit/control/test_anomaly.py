"""The capture rules as pure arithmetic (mindspeed_prof/control/anomaly.py): what is a slow step, what
is a straggler, which units are judged, when a capture may start and which units it records."""

import copy

import pytest

from mindspeed_prof.control import anomaly
from mindspeed_prof.control.anomaly import (CaptureLimits,
    JobWindows,
    RollingMedian,
    SpikeRule,
    StragglerRule,
    capture_span,
    decide)
from mindspeed_prof.control.capture_words import describe


def test_the_rolling_median_covers_only_the_last_values():
    median = RollingMedian(size=3)
    assert median.median() is None
    for value in (100.0, 1.0, 2.0, 3.0):
        median.add(value)
    assert len(median) == 3 and median.median() == 2.0


def test_a_unit_over_factor_times_the_median_of_the_units_before_it_is_a_spike():
    rule = SpikeRule(factor=2.0, warmup_until=0)
    for n in range(1, 11):
        assert rule.observe(n, 1.0) is None
    assert rule.observe(11, 1.9) is None
    spike = rule.observe(12, 2.5)
    assert (spike.unit, spike.seconds, spike.median_s, spike.samples) == (12, 2.5, 1.0, 11)
    assert spike.ratio == 2.5
    assert spike.evidence() == {"rule": "slow step", "factor": 2.0, "unit": 12, "seconds": 2.5,
                                "median_s": 1.0, "median_of": 11, "ratio": 2.5}


def test_no_unit_is_judged_during_the_warm_up_nor_before_the_median_has_enough_units():
    rule = SpikeRule(factor=2.0, warmup_until=5)
    # the start-up units are slow and never judged, nor do they teach the median
    assert [rule.observe(n, 50.0) for n in range(1, 6)] == [None] * 5
    assert len(rule.history) == 0
    for n in range(6, 6 + anomaly.MIN_SAMPLES):
        assert rule.observe(n, 1.0) is None  # too few units before it to judge
    assert rule.seen.judged == 0
    assert rule.observe(6 + anomaly.MIN_SAMPLES, 10.0).unit == 6 + anomaly.MIN_SAMPLES
    assert rule.seen.judged == 1


def test_a_spike_joins_the_median_so_a_lasting_slowdown_stops_being_one():
    rule = SpikeRule(factor=2.0, warmup_until=0, size=10)
    for n in range(1, 11):
        rule.observe(n, 1.0)
    spikes = [rule.observe(n, 3.0) for n in range(11, 31)]
    assert spikes[0] is not None and spikes[-1] is None
    assert sum(s is not None for s in spikes) == 5  # until the slow units are the median


def test_the_worst_spike_of_a_poll_interval_is_the_one_reported():
    rule = SpikeRule(factor=2.0, warmup_until=0)
    for n in range(1, 11):
        rule.observe(n, 1.0)
    worst = rule.worst([(11, 2.5), (12, 6.0), (13, 1.0), (14, 3.0)])
    assert worst.unit == 12 and worst.seconds == 6.0


def test_the_ratios_seen_count_how_close_ordinary_units_came_to_each_factor():
    rule = SpikeRule(factor=5.0, warmup_until=0)
    for n, value in enumerate([1.0] * 10 + [1.3, 1.6, 2.1], start=1):
        rule.observe(n, value)
    seen = rule.seen.as_dict()
    assert seen["largest"] == 2.1
    assert seen["over"] == {"1.25": 3, "1.5": 2, "2": 1, "3": 0, "5": 0}


def test_a_straggler_must_stay_the_slowest_beyond_the_factor_at_two_polls_in_a_row():
    rule = StragglerRule(factor=1.5)
    assert rule.judge([1.0, 2.0, 1.0, 1.0]) is None  # first time: not yet
    assert rule.judge([1.0, 1.0, 1.0, 2.0]) is None  # another rank: the streak restarts
    found = rule.judge([1.0, 1.0, 1.1, 2.0])
    assert found.rank == 3 and found.seconds == 2.0 and found.median_s == 1.0
    assert rule.judge([1.0, 1.0, 1.1, 2.0]) is None  # found once; counting starts again


def test_with_two_ranks_the_straggler_is_judged_against_the_other_one():
    # the median of both would be their mean, which no rank exceeds twice
    rule = StragglerRule(factor=2.0, confirm=1)
    found = rule.judge([0.1, 0.35])
    assert (found.rank, found.reference, found.median_s) == (1, 0, 0.1)


def test_the_reference_is_the_median_rank_of_the_others():
    rule = StragglerRule(factor=1.5, confirm=1)
    found = rule.judge([1.0, 0.8, 1.2, 5.0, 0.9])
    assert found.rank == 3 and found.reference == 4  # others: 0.8 [0.9] 1.0 1.2, the lower middle
    evidence = found.evidence()
    assert evidence["per_rank_s"] == {"0": 1.0, "1": 0.8, "2": 1.2, "3": 5.0, "4": 0.9}
    assert evidence["straggler"] == 3 and evidence["reference"] == 4
    assert StragglerRule(1.5, confirm=1).judge([1.0, 0.8, 1.2, 5.0, 0.9, 1.1]).reference == 0


def test_ranks_without_a_number_are_left_out_and_one_number_judges_nothing():
    rule = StragglerRule(factor=1.5, confirm=1)
    assert rule.judge([None, 3.0]) is None
    assert rule.judge([None, None]) is None
    assert rule.judge([1.0, None, 3.0]).rank == 2


def test_units_in_a_window_or_settling_after_it_are_busy():
    windows = JobWindows([(10, 12)])
    windows.add(30, 31)
    busy = [n for n in range(1, 40) if windows.busy(n)]
    settle = anomaly.SETTLE
    assert busy == [*range(10, 13 + settle), *range(30, 32 + settle)]
    assert windows.next_first(13) == 30 and windows.next_first(30) is None


def test_busy_stays_fast_and_right_with_ten_thousand_planned_windows():
    windows = JobWindows([(k * 100, k * 100 + 2) for k in range(1, 10_001)])
    assert windows.busy(500_001) and not windows.busy(500_050)
    assert windows.next_first(500_050) == 500_100


def test_a_capture_records_from_the_unit_that_decides_it_cut_before_the_next_window_and_the_end():
    windows = JobWindows([(20, 22)])
    assert capture_span(10, 3, None, windows) == (10, 12)
    assert capture_span(18, 5, None, windows) == (18, 19)
    assert capture_span(19, 3, None, windows) == (19, 19)
    assert capture_span(29, 5, 30, windows) == (29, 30)


def spike_at(n):
    return {"rule": "slow step", "factor": 2.0, "unit": n - 1, "seconds": 3.0, "median_s": 1.0,
            "median_of": 20, "ratio": 3.0}


def test_decide_opens_a_capture_on_the_selected_ranks_and_counts_it():
    limits, windows = CaptureLimits(max_captures=2, cooldown=10), JobWindows()
    capture, why = decide(40, spike=spike_at(40), straggler=None, limits=limits,
                          windows=windows, steps=3, last_unit=None)
    assert why is None
    assert (capture.number, capture.first, capture.last, capture.ranks) == (1, 40, 42, None)
    assert capture.evidence["capture"] == 1 and capture.evidence["seen_at"] == 40
    assert windows.busy(41) and limits.next_allowed == 53


def test_decide_refuses_in_the_cool_down_after_the_last_capture_and_while_a_window_runs():
    limits, windows = CaptureLimits(max_captures=2, cooldown=10), JobWindows([(60, 70)])
    decide(40, spike=spike_at(40), straggler=None, limits=limits, windows=windows, steps=3,
           last_unit=None)
    assert decide(50, spike=spike_at(50), straggler=None, limits=limits, windows=windows,
                  steps=3, last_unit=None) == (None, "cool-down (--profile-capture-cooldown) "
                                                     "until 53")
    assert decide(65, spike=spike_at(65), straggler=None, limits=limits, windows=windows,
                  steps=3, last_unit=None) == (None, "another window is running")
    assert decide(80, spike=spike_at(80), straggler=None, limits=limits, windows=windows,
                  steps=3, last_unit=None)[0].number == 2
    assert decide(200, spike=spike_at(200), straggler=None, limits=limits, windows=windows,
                  steps=3, last_unit=None) == (None, "--profile-max-captures 2 reached")
    assert limits.exhausted


def test_decide_without_an_anomaly_takes_nothing_and_says_nothing():
    assert decide(40, spike=None, straggler=None, limits=CaptureLimits(2, 10),
                  windows=JobWindows(), steps=3, last_unit=None) == (None, None)


def test_a_straggler_capture_chooses_the_straggler_and_its_reference():
    found = StragglerRule(factor=1.5, confirm=1).judge([1.0, 1.0, 4.0, 1.1])
    capture, _ = decide(30, spike=None, straggler=found, limits=CaptureLimits(3, 0),
                        windows=JobWindows(), steps=2, last_unit=None)
    assert capture.ranks == (1, 2) and (capture.first, capture.last) == (30, 31)
    assert capture.role_of(2) == "straggler" and capture.role_of(1) == "reference"


def test_every_rank_reaches_the_same_decisions_from_the_same_exchanged_numbers():
    rank_states = [(CaptureLimits(2, 5), JobWindows([(50, 52)]), StragglerRule(1.5))
                   for _ in range(4)]
    polls = [(n, [1.0, 1.0, 1.0 + (n > 20) * 2.0, 1.05]) for n in range(10, 120, 2)]
    decisions = []
    for limits, windows, rule in rank_states:
        mine = []
        for n, numbers in polls:
            capture, why = decide(n, spike=None, straggler=rule.judge(copy.copy(numbers)),
                                  limits=limits, windows=windows, steps=3, last_unit=100)
            mine.append((n, capture and (capture.first, capture.last, capture.ranks), why))
        decisions.append(mine)
    assert all(d == decisions[0] for d in decisions)
    taken = [d[1] for d in decisions[0] if d[1]]
    assert taken == [(24, 26, (1, 2)), (32, 34, (1, 2))]


@pytest.mark.parametrize("evidence, words", [
    (spike_at(9), "slow step: iteration 8 took 3 s, 3.00x the median 1 s of the 20 before it "
                  "(factor 2)"),
    ({"rule": "straggler", "straggler": 3, "reference": 0, "seconds": 0.4, "median_s": 0.1,
      "ratio": 4.0, "factor": 1.5},
     "straggler: rank 3 computed 0.4 s per iteration, 4.00x the other ranks' median 0.1 s "
     "(factor 1.5); reference rank 0"),
    ({"rule": "request", "request": "abc"}, "on request abc (mindspeed-prof trigger)"),
    ({"rule": "slow step"}, "slow step"),
])
def test_a_capture_says_why_it_was_taken_in_one_line(evidence, words):
    assert describe(evidence) == words


def test_ranks_a_few_tens_of_ms_apart_are_no_straggler_whatever_their_ratio():
    # two ranks of an ordinary CPU job on a busy host: 3x apart, but 80 ms
    rule = StragglerRule(factor=1.5)
    assert [rule.judge([0.04, 0.12]) for _ in range(4)] == [None] * 4
    assert rule.seen.as_dict()["largest"] == 3.0  # seen, and judged no straggler


def test_a_rank_slower_by_the_factor_and_over_the_minimum_gap_is_still_a_straggler():
    rule = StragglerRule(factor=2.0)
    gap = anomaly.STRAGGLER_MIN_GAP_S + 0.05
    assert rule.judge([0.1, 0.1 + gap]) is None  # first poll
    assert rule.judge([0.1, 0.1 + gap]).rank == 1
