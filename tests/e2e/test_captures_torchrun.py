"""Captures by themselves on the stand-in Megatron job under torchrun (gloo, two ranks): a slow
iteration injected on rank 1, a rank slowed for good (a straggler), and a run without either.

This machine is shared and oversubscribed (load 10-15 on 2 cores while these were written):
ordinary steps reach several times the median here (BENCHMARKS.md: the false-positive
measurement), so the factors below sit above what jitter reached there and the injected
anomalies far above them.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from harness.launch import default_args
from helpers.doc_samples import unprinted
from helpers.e2e import REPO, check, env_for, train
from helpers.traces import manifest, step_ids, torch_traces

pytestmark = pytest.mark.e2e


def rank_of(path):
    return int(os.path.basename(path).split(".")[0].removeprefix("rank"))


def capture_flags(save, *extra):
    return ["--profile", "--profile-save-path", str(save), "--profile-backend", "torch",
            "--profile-ranks", "all", "--profile-capture-warmup", "5", *map(str, extra)]


def windows(save, rank):
    return {w["dir"]: w for w in manifest(save, rank)["windows"]}


def test_a_slow_iteration_on_rank_1_is_captured_from_the_next_one_on_every_rank_alike(tmp_path):
    save = tmp_path / "prof"
    args = default_args(train_iters=22) + capture_flags(
        save, "--profile-on-slow-step", 12, "--profile-trigger-poll", 1)
    run = train(tmp_path, args, env=env_for(tmp_path, HARNESS_SLEEP_AT_ITER="14:3@1"),
                timeout=400).check()
    traces = torch_traces(save)
    assert sorted(rank_of(t) for t in traces) == [0, 1], run.describe()
    assert {os.path.relpath(os.path.dirname(t), save) for t in traces} == {"iter_15-17"}
    assert [step_ids(t) for t in traces] == [[15, 16, 17], [15, 16, 17]]
    for rank in (0, 1):
        why = windows(save, rank)["iter_15-17"]["trigger"]
        assert (why["rule"], why["unit"], why["seen_at"], why["factor"]) == (
            "slow step", 14, 15, 12.0)
        assert why["seconds"] > 12 * why["median_s"]
        assert manifest(save, rank)["captures"]["taken"] == [
            {"capture": 1, "first": 15, "last": 17, "ranks": [0, 1], "rule": "slow step"}]
    assert "capture 1/3: slow step: iteration 14 took" in run.stdout
    code, report = check(save)
    assert code == 0, report


def test_a_straggler_is_captured_with_a_median_reference_and_summary_names_the_slowed_operator(
        tmp_path):
    save = tmp_path / "prof"
    args = default_args(train_iters=24) + capture_flags(
        save, "--profile-on-straggler", 4, "--profile-trigger-poll", 2,
        "--profile-max-captures", 1)
    run = train(tmp_path, args, env=env_for(tmp_path, HARNESS_BUSY_FROM_ITER="8:0.6@1"),
                timeout=400).check()
    [folder] = {os.path.relpath(os.path.dirname(t), save) for t in torch_traces(save)}
    traces = torch_traces(save / folder)
    assert sorted(rank_of(t) for t in traces) == [0, 1], run.describe()
    assert step_ids(traces[0]) == step_ids(traces[1])
    first = int(folder.removeprefix("iter_").split("-")[0])
    assert first >= 10  # two polls (8 and 10 at the earliest) must find rank 1 slow
    for rank, role in ((0, "reference"), (1, "straggler")):
        why = windows(save, rank)[folder]["trigger"]
        assert why["rule"] == "straggler" and why["this_rank"] == role
        assert (why["straggler"], why["reference"]) == (1, 0)
        assert why["per_rank_s"]["1"] > 4 * why["per_rank_s"]["0"]
        assert why["measure"] == "compute time: unit time minus time waiting in collectives"
    assert check(save)[0] == 0
    summary = subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", "summary", str(save),
                              "--json"], capture_output=True, text=True)
    assert summary.returncode == 0, summary.stderr
    [capture] = json.loads(summary.stdout)["captures"]
    assert capture["anomalous"]["rank"] == 1 and capture["reference"]["rank"] == 0
    assert capture["grew"][0]["name"] == "aten::mm"  # the slowed operator grew most
    text = subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", "summary", str(save)],
                          capture_output=True, text=True).stdout
    assert "grew most per step, rank 1 against rank 0:" in text
    # docs/captures.md shows this run: its lines are what the log and the commands print today
    assert_the_docs_sample_is_what_this_run_printed(run.stdout, save)


def docs_sample():
    """docs/captures.md's example: rank 0's log line(s), then each ``$ mindspeed-prof CMD prof``
    and its output, as [(None, log lines), (CMD, output lines), ...]."""
    text = open(os.path.join(REPO, "docs", "captures.md"), encoding="utf-8").read()
    [block] = re.findall(r"```\n(\[mindspeed_prof\] capture .+?)\n```", text, re.S)
    parts = [(None, [])]
    for line in block.split("\n"):
        if line.startswith("$ mindspeed-prof "):
            parts.append((line[2:].split("#")[0].split()[1], []))
        else:
            parts[-1][1].append(line)
    return parts


def assert_the_docs_sample_is_what_this_run_printed(log, save):
    parts = docs_sample()
    assert [command for command, _ in parts] == [None, "check", "summary"]
    for command, lines in parts:
        if command is None:
            printed = log.splitlines()
        else:
            printed = subprocess.run(
                [sys.executable, "-m", "mindspeed_prof.cli", command, str(save)],
                capture_output=True, text=True).stdout.replace(str(save), "prof").splitlines()
        missing = unprinted(lines, printed)
        assert missing == [], (f"docs/captures.md: lines {command or 'the log'} no longer "
                               f"prints: {missing}; it prints:\n" + "\n".join(printed))


def test_a_long_run_with_only_ordinary_jitter_captures_nothing_and_check_says_why(tmp_path):
    save = tmp_path / "prof"
    args = default_args(train_iters=300) + capture_flags(
        save, "--profile-on-slow-step", 15, "--profile-on-straggler", 4,
        "--profile-trigger-poll", 10)
    run = train(tmp_path, args, timeout=900).check()
    assert torch_traces(save) == [], run.describe()
    for rank in (0, 1):
        captures = manifest(save, rank)["captures"]
        assert captures["taken"] == [] and captures["not_captured"] == 0
        assert captures["ratios_seen"]["straggler"]["judged"] >= 25
    assert manifest(save, 0)["captures"]["ratios_seen"]["slow step"]["judged"] >= 250
    code, report = check(save)
    assert code == 0, report
    assert all(r["notes"][0].startswith("armed for captures, none taken: no anomaly")
               for r in report["ranks"])


def test_with_both_rules_on_and_a_capture_taken_the_losses_are_bit_identical(tmp_path):
    save = tmp_path / "on" / "prof"
    plain = train(tmp_path / "off", default_args(train_iters=16)).check()
    args = default_args(train_iters=16) + capture_flags(
        save, "--profile-on-slow-step", 12, "--profile-on-straggler", 4,
        "--profile-trigger-poll", 1)
    # a slow iteration on rank 1 makes a capture, so the losses cover profiled iterations too
    on = train(tmp_path / "on", args, env=env_for(tmp_path / "on",
                                                   HARNESS_SLEEP_AT_ITER="12:3@1")).check()
    assert len(torch_traces(save)) == 2, on.describe()
    for rank in (0, 1):
        assert on.losses(rank) == plain.losses(rank) and len(plain.losses(rank)) == 16
