"""A window of requests or RL steps that the run leaves half done is `cut`, never `valid`, and
nothing it recorded is lost (issue 19 §1-§3). Each scenario runs a real role or request driver
in its own process, ends it the way a job ends, and reads the manifest and `check`."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from helpers.cli import rank_entry, run_cli_json
from helpers.traces import manifest, step_ids, torch_traces

ROLE = textwrap.dedent("""
    import os, signal, sys, time, torch, mindspeed_prof
    SAVE, HOW, AT = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cfg = {{"profile": True, "profile_save_path": SAVE, "profile_backend": "torch",
            "profile_analyse": "sync", "roles": {{"actor": {{"profile_steps": "{steps}"}}}}}}
    prof = mindspeed_prof.role_profiler("actor", cfg, rank=0, world_size=1)
    for g in range({first}, 7):
        with prof.step(g):
            (torch.randn(16, 16) @ torch.randn(16, 16)).sum()
            if g == AT and HOW == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            if g == AT and HOW == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if g == AT and HOW == "ctrl-c":
                raise KeyboardInterrupt
            if g == AT and HOW == "raise":
                raise RuntimeError("the update diverged")
            if g == AT and HOW == "exit":
                sys.exit(3)
        if g == AT and HOW == "early":
            break
    prof.close()
""")


def run_role(tmp_path, how, at, steps="2-5", first=1):
    script = tmp_path / "role.py"
    script.write_text(ROLE.format(steps=steps, first=first))
    save = tmp_path / "prof"
    done = subprocess.run([sys.executable, str(script), str(save), how, str(at)],
                          capture_output=True, text=True, timeout=120)
    return done, save / "actor"


def verdict(capsys, save):
    """check's exit code and rank 0's entry (a role's folder: the entry of its own folder)."""
    capsys.readouterr()  # what the drivers logged in this process
    code, report = run_cli_json(capsys, "check", save)
    if "folders" in report:
        report = report["folders"][0]
    return code, rank_entry(report, 0)


@pytest.mark.slow  # the scenario in its own process, ended as a job ends
@pytest.mark.parametrize("how, reason", [("sigterm", "signal"), ("ctrl-c", "interrupted"),
                                         ("raise", "exception"), ("exit", "sys.exit"),
                                         ("early", "finished")])
def test_an_rl_window_ended_early_is_cut_and_keeps_the_steps_it_recorded(tmp_path, capsys, how,
                                                                         reason):
    done, save = run_role(tmp_path, how, at=3)
    data = manifest(save, 0)
    assert data["status"] == "cut", done.stderr[-2000:]
    assert data["exit"]["reason"] == reason
    (planned,) = data["planned"]
    assert (planned["start"], planned["end"], planned["status"]) == (2, 6, "cut")
    assert planned["recorded"][:1] == [2]
    assert [step_ids(t) for t in torch_traces(str(save))][:1] == [[2]]  # nothing lost
    code, entry = verdict(capsys, save)
    assert code == 1 and entry["verdict"] == "cut"
    assert any("window of RL steps 2-5 cut short" in p for p in entry["problems"])
    # every verdict, the cut capture's own included, counts in the role's words
    texts = [t for r in [entry, *entry["runs"]] for t in r["problems"] + r["warnings"]]
    assert not [t for t in texts if "iteration" in t], texts
    if how == "sigterm":
        assert any("RL step 3 cut mid-way" in t for r in entry["runs"] for t in r["problems"])


@pytest.mark.slow  # the scenario in its own process, ended as a job ends
def test_an_rl_process_killed_inside_its_window_is_cut_not_valid(tmp_path, capsys):
    # SIGKILL leaves no way to write anything more: the window's record stays `running`
    # and the manifest has no exit, which check reads as a window the process never finished.
    done, save = run_role(tmp_path, "sigkill", at=3)
    assert done.returncode == -signal.SIGKILL
    data = manifest(save, 0)
    assert data["exit"] is None and data["planned"][0]["status"] == "running"
    code, entry = verdict(capsys, save)
    assert code == 1 and entry["verdict"] == "cut"
    assert any("never finished" in p for p in entry["problems"])


@pytest.mark.slow  # the scenario in its own process, ended as a job ends
def test_a_window_cut_in_its_first_step_names_the_partial_trace_it_wrote(tmp_path, capsys):
    done, save = run_role(tmp_path, "sigterm", at=2)
    assert [step_ids(t) for t in torch_traces(str(save))] == [[2]]  # the partial step, on disk
    (said,) = [w for w in manifest(save, 0)["warnings"] if "before the window" in str(w)]
    assert "partial trace of RL step 2, cut mid-way, was written" in str(said), said
    assert "nothing was recorded" not in done.stderr
    code, entry = verdict(capsys, save)
    assert code == 1 and entry["verdict"] == "cut"


@pytest.mark.slow  # the scenario in its own process, ended as a job ends
def test_a_role_resumed_inside_its_window_records_the_steps_that_run(tmp_path, capsys):
    done, save = run_role(tmp_path, "none", at=0, first=3)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [step_ids(t) for t in torch_traces(str(save))] == [[3], [4], [5]]
    assert "RL steps 3-3 were all skipped" not in done.stderr
    data = manifest(save, 0)
    assert data["planned"][0]["skipped"] == [2] and data["planned"][0]["status"] == "complete"
    code, entry = verdict(capsys, save)
    assert code == 0 and entry["verdict"] == "valid"
    assert any("never began in this process" in w for w in entry["warnings"])


def test_a_refused_colocated_session_is_a_gap_the_verdict_shows(tmp_path, capsys):
    import mindspeed_prof
    import torch

    cfg = {"profile": True, "profile_save_path": str(tmp_path), "profile_backend": "torch",
           "profile_analyse": "sync",
           "roles": {"actor": {"profile_steps": "2"}, "ref": {"profile_steps": "2-3"}}}
    actor = mindspeed_prof.role_profiler("actor", cfg, rank=0, world_size=1)
    ref = mindspeed_prof.role_profiler("ref", cfg, rank=0, world_size=1)
    with actor.step(2):
        with ref.step(2):  # the actor's session runs: the ref's is refused, the work goes on
            torch.randn(8, 8).sum()
    with ref.step(3):  # recorded: every session on disk is whole, the window is not
        torch.randn(8, 8).sum()
    actor.close()
    ref.close()
    code, entry = verdict(capsys, tmp_path / "ref")
    assert code == 1 and entry["verdict"] == "incomplete"
    assert any("was refused" in p for p in entry["problems"])
    assert any("role 'actor'" in e for e in entry["errors"])


def test_a_second_open_profiler_for_the_same_role_is_refused_and_the_first_is_kept(tmp_path):
    import mindspeed_prof
    from mindspeed_prof.errors import ConfigError

    cfg = {"profile": True, "profile_save_path": str(tmp_path), "profile_backend": "torch",
           "profile_analyse": "sync", "roles": {"actor": {"profile_steps": "1"}}}
    first = mindspeed_prof.role_profiler("actor", cfg, rank=0, world_size=1)
    with pytest.raises(ConfigError, match="already written by another open profiler"):
        mindspeed_prof.role_profiler("actor", cfg, rank=0, world_size=1)
    with first.step(1):
        pass
    first.close()
    again = mindspeed_prof.role_profiler("actor", cfg, rank=0, world_size=1)
    again.close()
    # The first one's manifest, with its window, is still there beside the second's.
    found = [json.load(open(tmp_path / "actor" / name))
             for name in os.listdir(tmp_path / "actor") if name.startswith("profile_manifest")]
    assert sorted(len(data["windows"]) for data in found) == [0, 1]
    with pytest.raises(RuntimeError, match=r"step\(2\) after close\(\)"):
        first.step(2)


REQUESTS = textwrap.dedent("""
    import os, signal, sys, torch
    from mindspeed_prof import ProfilerConfig
    from mindspeed_prof.drivers.inference import RequestDriver
    SAVE, HOW = sys.argv[1], sys.argv[2]
    driver = RequestDriver(ProfilerConfig(profile=True, profile_step_start=2, profile_step_end=4,
                                          profile_save_path=SAVE, profile_backend="torch",
                                          profile_analyse="sync"))
    driver.arm()
    for n in range(1, 5):
        try:
            with driver.request():
                with driver.forward():
                    (torch.randn(16, 16) @ torch.randn(16, 16)).sum()
                if n == 2 and HOW == "raise":
                    raise ValueError("prompt longer than the sequence length")
        except ValueError:
            pass  # a server answers the error and serves on
        if n == 2 and HOW == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
    driver.close()
""")


@pytest.mark.slow  # the scenario in its own process, ended as a job ends
@pytest.mark.parametrize("how, problem", [("sigkill", "never finished"),
                                          ("raise", "cut short (exception)")])
def test_a_request_window_a_server_never_completes_is_cut(tmp_path, capsys, how, problem):
    script = tmp_path / "serve.py"
    script.write_text(REQUESTS)
    save = tmp_path / "prof"
    subprocess.run([sys.executable, str(script), str(save), how], capture_output=True, text=True,
                   timeout=120)
    code, entry = verdict(capsys, save)
    assert code == 1 and entry["verdict"] == "cut"
    assert any(problem in p for p in entry["problems"]), entry["problems"]
