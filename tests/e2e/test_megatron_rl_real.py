"""Opt-in real tier: Megatron-LM 0.19's own RL loop (``train_rl.py --perform-rl-step``) on the
CPU, rollouts on the dynamic engine behind its real HTTP front ends and coordinator, profiled
through ``-m mindspeed_prof.launch``: each profiled iteration is one ProfilerStep holding the
``stage:rollout`` / ``stage:logprobs`` / ``stage:update`` ranges and their compute, only the
training rank writes, ``check`` passes, the losses and rewards equal an unprofiled run's, and
an exit from inside the loop (megatron.rl's ``os._exit``) still leaves a final manifest.

Runs when ``MEGATRON_RL_TIER=1`` and ``MEGATRON_LM_PATH`` points at a ``core_v0.19.0`` checkout,
on Python 3.12 with megatron-core 0.19 and Megatron-RL's imports (see
tests/harness/megatron_rl/README.md); skipped otherwise. Three jobs of ~11 s each on a quiet
machine (about a minute each on 2 loaded cores).
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from harness.dynamic.marks import MODULE_MARKS
from helpers.traces import manifest, step_ids, torch_traces

CHECKOUT = os.environ.get("MEGATRON_LM_PATH") or ""
RL_DEPS = ("openai", "httpx", "fastapi", "uvicorn", "aiohttp", "tensorboard", "wandb", "quart",
           "hypercorn", "zmq", "msgpack", "einops", "yaml")
MISSING = [name for name in RL_DEPS if importlib.util.find_spec(name) is None]
WANTED = os.environ.get("MEGATRON_RL_TIER") == "1"
HAS_RL = os.path.isfile(os.path.join(CHECKOUT, "train_rl.py")) and \
    os.path.isdir(os.path.join(CHECKOUT, "megatron", "rl"))

pytestmark = [
    *MODULE_MARKS,
    pytest.mark.skipif(not WANTED, reason="opt-in real tier: MEGATRON_RL_TIER=1 and "
                                          "MEGATRON_LM_PATH=<Megatron-LM core_v0.19.0 checkout>"),
    pytest.mark.skipif(WANTED and not HAS_RL,
                       reason=f"MEGATRON_LM_PATH={CHECKOUT!r} has no train_rl.py and megatron/rl "
                              f"(git worktree add DIR core_v0.19.0)"),
    pytest.mark.skipif(WANTED and bool(MISSING),
                       reason=f"Megatron-RL needs {', '.join(MISSING)}: see "
                              f"tests/harness/megatron_rl/README.md for the pinned versions"),
]

LAUNCHER = ("-m", "mindspeed_prof.launch")
STAGES = ("stage:rollout", "stage:logprobs", "stage:update")
COMPUTE = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear")


def profile_flags(save, start, end):
    return ("--profile", "--profile-step-start", str(start), "--profile-step-end", str(end),
            "--profile-ranks", "0", "--profile-save-path", str(save), "--profile-backend",
            "torch")


def finished(run):
    assert run.returncode == 0, f"wall {run.wall_s} s\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}"
    return run


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    from harness.megatron_rl.launch import run_train_rl

    return finished(run_train_rl(tmp_path_factory.mktemp("rl_plain")))


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    from harness.megatron_rl.launch import run_train_rl

    work = tmp_path_factory.mktemp("rl_profiled")
    run = finished(run_train_rl(work, profile_flags(work / "prof", 2, 4), LAUNCHER))
    run.save = str(work / "prof")
    [run.trace] = torch_traces(run.save)
    with open(run.trace) as handle:
        run.events = [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]
    return run


def spans(events, name, pid=None):
    return [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
            if e["name"] == name and (pid is None or e.get("pid") == pid)]


def check_exit_code(save):
    done = subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", "check", str(save)],
                          capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def test_train_rl_runs_four_grpo_iterations_unprofiled_and_profiled(plain, profiled):
    assert sorted(plain.iterations()) == [1, 2, 3, 4]
    assert sorted(profiled.iterations()) == [1, 2, 3, 4]
    assert sorted(plain.rollouts()) == [0, 1, 2, 3]  # one collection per iteration


def test_the_profiled_window_is_one_trace_of_iterations_2_and_3_from_rank_0(profiled):
    assert sorted(os.listdir(profiled.save)) == ["profile_manifest_rank0.json",
                                                 os.path.basename(profiled.trace)]
    assert os.path.basename(profiled.trace).startswith("rank0.")
    assert step_ids(profiled.trace) == [2, 3]
    found = manifest(profiled.save, 0)
    assert found["unit"] == "iteration"  # the RL loop's iteration, not the engine's steps
    assert [w["iterations_recorded"] for w in found["windows"]] == [[2, 3]]
    assert found["exit"]["reason"] == "finished"


def test_each_profiled_iteration_holds_rollout_logprobs_and_update_with_their_compute(profiled):
    pid = manifest(profiled.save, 0)["pid"]
    for step in (2, 3):
        [(start, end)] = spans(profiled.events, f"ProfilerStep#{step}")
        inside = {name: [s for s in spans(profiled.events, name) if start <= s[0] < end]
                  for name in STAGES}
        assert all(len(found) == 1 for found in inside.values()), (step, inside)
        (rollout,), (logprobs,), (update,) = (inside[name] for name in STAGES)
        assert rollout[1] <= logprobs[0] and logprobs[1] <= update[0] and update[1] <= end
        for name, (low, high) in zip(STAGES, (rollout, logprobs, update)):
            # the engine's forwards (rollout), the log-prob pass and the policy update all run
            # on the training process: their matrix products lie inside their own range
            ops = [e for e in profiled.events if e["name"] in COMPUTE and e.get("pid") == pid
                   and low <= float(e["ts"]) <= high]
            assert ops, f"no {'/'.join(COMPUTE)} inside {name} of iteration {step}"


def test_nothing_is_written_by_the_front_ends_or_the_coordinator(profiled):
    processes = profiled.processes()
    helpers = set(processes["frontend_pids"]) | {processes["coordinator_pid"]}
    assert processes["frontend_pids"] and processes["coordinator_pid"] is not None
    assert manifest(profiled.save, 0)["pid"] == processes["pid"]  # the training rank's own
    assert {e.get("pid") for e in profiled.events} & helpers == set()
    assert not any(str(pid) in name for pid in helpers for name in os.listdir(profiled.save))


def test_check_passes_on_the_profiled_rl_run(profiled):
    code, said = check_exit_code(profiled.save)
    assert code == 0, said
    assert "steps 2 3" in said


def test_losses_and_rewards_equal_the_unprofiled_run(plain, profiled):
    # deterministic here: the seeded engine sampler sees the agent's requests one at a time
    assert profiled.iterations() == plain.iterations()
    assert profiled.rollouts() == plain.rollouts()
    assert all("lm loss" in logged or "grad norm" in logged
               for logged in plain.iterations().values())


def test_an_exit_inside_the_rl_loop_still_writes_the_window_and_the_final_manifest(
        tmp_path_factory):
    # --exit-interval: train() leaves through megatron.rl's os._exit(0), its finally never runs
    from harness.megatron_rl.launch import run_train_rl

    work = tmp_path_factory.mktemp("rl_exit")
    run = finished(run_train_rl(work, ("--exit-interval", "3", *profile_flags(work / "prof", 2, 4)),
                                LAUNCHER))
    assert "exiting program at iteration 3" in run.stdout
    [trace] = torch_traces(str(work / "prof"))
    assert step_ids(trace) == [2, 3]
    found = manifest(str(work / "prof"), 0)
    assert found["exit"]["reason"] == "sys.exit" and "os._exit" in found["exit"]["detail"]
    code, said = check_exit_code(work / "prof")
    assert code == 0, said
