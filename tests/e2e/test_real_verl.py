"""Opt-in: the verl integration on the real verl 0.9.1 (``RL_VERL_TIER=1``, run with an
interpreter that has verl, e.g. the environment of docs/rl.md's "The real verl tier"; Ray starts
slowly on 2 cores: each job takes one to two minutes).

verl's own ``main_ppo`` -> ``RayPPOTrainer.fit``, through ``mindspeed_prof.integrations.verl.
main_ppo``: 3 GRPO steps of a tiny random Llama, actor + rollout + ref colocated in one FSDP2
``ProfiledActorRolloutRefWorker`` on the CPU (tests/harness/verl). Once configured by a role YAML,
once by verl's own ``global_profiler`` settings.
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
import time

import pytest

from helpers.cli import run_cli_json
from helpers.rl import manifests, steps_by_folder
from helpers.traces import torch_traces

TIER_ENV = "RL_VERL_TIER"
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get(TIER_ENV) != "1" or importlib.util.find_spec("verl") is None,
                       reason=f"{TIER_ENV}=1 and an environment with verl 0.9.1 run the verl tier"),
]

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TESTS)
ENTRY = "mindspeed_prof.integrations.verl.main_ppo"
JOB_TIMEOUT_S = 1200
ROLE_YAML = """\
profile: true
profile_save_path: {save}
profile_backend: torch
roles:
  actor:   {{profile_steps: "2-3", profile_stages: [old_logprob, update]}}
  ref:     {{profile_steps: "2"}}
  rollout: {{profile_steps: "2-3"}}
"""
EXPECTED = {"actor/old_logprob": {"step_2-2": [2], "step_3-3": [3]},
            "actor/update": {"step_2-2": [2], "step_3-3": [3]},
            "ref/ref_logprob": {"step_2-2": [2]},
            "rollout/generate": {"step_2-2": [2], "step_3-3": [3]}}


class Job:
    def __init__(self, workdir, save, done, seconds):
        self.workdir, self.save, self.done, self.seconds = workdir, save, done, seconds
        self.log = done.stdout + done.stderr

    def pids(self, actor):
        """Pids Ray's log prefixes name for actors of class ``actor`` (``(Name pid=N)``)."""
        return {int(p) for p in re.findall(rf"\({re.escape(actor)} pid=(\d+)\)", self.log)}


def run_job(workdir, *overrides, returncode=0):
    from harness.verl.job import environment

    save = workdir / "prof"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness.verl.job", str(workdir), ENTRY,
                           *[o.format(save=save, workdir=workdir) for o in overrides]],
                          capture_output=True, text=True, timeout=JOB_TIMEOUT_S, cwd=workdir,
                          env=environment(str(workdir), pythonpath=(REPO,)))
    job = Job(workdir, save, done, round(time.monotonic() - started, 1))
    print(f"verl job {workdir.name}: {job.seconds} s, exit {done.returncode}")
    assert done.returncode == returncode, job.log[-6000:]
    return job


@pytest.fixture(scope="module")
def yaml_job(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("verl_yaml")
    (workdir / "rl.yaml").write_text(ROLE_YAML.format(save=workdir / "prof"))
    return run_job(workdir, "+actor_rollout_ref.mindspeed_prof={workdir}/rl.yaml")


@pytest.fixture(scope="module")
def verl_driven_job(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("verl_driven")
    return run_job(workdir, "global_profiler.tool=mindspeed_prof", "global_profiler.steps=[2,3]",
                   "global_profiler.save_path={save}",
                   "actor_rollout_ref.actor.profiler.enable=true",
                   "actor_rollout_ref.rollout.profiler.enable=true")


def test_the_role_yaml_gets_exactly_its_sessions_numbered_with_verls_global_steps(yaml_job):
    assert "step:3 -" in yaml_job.log  # verl's own loop ran its 3 steps
    found = {folder: steps_by_folder(yaml_job.save / folder) for folder, _ in
             manifests(yaml_job.save)}
    assert found == EXPECTED


def test_stage_ranges_cover_the_work_of_each_method(yaml_job):
    for folder, windows in EXPECTED.items():
        stage = folder.split("/")[1]
        for window in windows:
            [trace] = torch_traces(str(yaml_job.save / folder / window))
            with open(trace) as handle:
                events = json.load(handle)["traceEvents"]
            [label] = [e for e in events if e.get("name") == f"stage:{stage}"]
            ops = [e for e in events if str(e.get("name", "")).startswith("aten::")
                   and e.get("tid") == label.get("tid")]
            assert ops, (folder, window)  # the method's own computation was recorded
            start, end = label["ts"], label["ts"] + label["dur"]
            assert all(start <= e["ts"] and e["ts"] + e.get("dur", 0) <= end for e in ops)


def test_only_the_worker_process_profiles_never_the_driver_or_task_runner(yaml_job):
    workers = yaml_job.pids("WorkerDict")
    runners = yaml_job.pids("_ProfiledTaskRunner")
    assert len(workers) == 1 and len(runners) == 1, (workers, runners)
    found = dict(manifests(yaml_job.save))
    assert {data["pid"] for data in found.values()} == workers
    assert all(data["errors"] == [] for data in found.values())
    # nothing anywhere else in the job's folder (the driver's and TaskRunner's cwd)
    stray = [os.path.join(d, n) for d, _, names in os.walk(yaml_job.workdir) for n in names
             if n.startswith("profile_manifest") and not d.startswith(str(yaml_job.save))]
    assert stray == []


def test_check_passes_with_every_role_valid(yaml_job, capsys):
    code, report = run_cli_json(capsys, "check", yaml_job.save)
    assert code == 0, report
    assert {(r["role"], r["rank"]): r["verdict"] for r in report["ranks"]} == {
        ("actor", 0): "valid", ("ref", 0): "valid", ("rollout", 0): "valid"}


def test_verls_global_profiler_settings_drive_the_same_sessions(verl_driven_job, capsys):
    # verl's start_profile(profile_step=g) reached the worker at steps 2 and 3 and agreed with
    # the integration's count (a disagreement is a StepOrderError that fails the job).
    found = {folder: steps_by_folder(verl_driven_job.save / folder) for folder, _ in
             manifests(verl_driven_job.save)}
    assert found == {key: value for key, value in EXPECTED.items() if not key.startswith("ref")}
    code, report = run_cli_json(capsys, "check", verl_driven_job.save)
    assert code == 0, report


def test_a_role_yaml_error_stops_the_job_in_the_task_runner_with_one_line_and_exit_2(tmp_path):
    (tmp_path / "rl.yaml").write_text(ROLE_YAML.format(save=tmp_path / "prof").replace(
        "  ref:", "  refs:"))
    job = run_job(tmp_path, "+actor_rollout_ref.mindspeed_prof={workdir}/rl.yaml", returncode=2)
    assert ("roles.refs is no role of a verl job; did you mean 'ref'?"
            in job.done.stderr.strip().splitlines()[-1])
    assert "Traceback" not in job.log and not job.pids("WorkerDict")  # before any worker
    assert not (tmp_path / "prof").exists()


def test_the_imitation_has_the_real_verls_shapes():
    def dump(*path):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([*path, TESTS, REPO]))
        out = subprocess.run([sys.executable, "-m", "harness.verl.shape_dump"], env=env,
                             capture_output=True, text=True, check=True, timeout=600).stdout
        return json.loads(out)

    assert dump(os.path.join(TESTS, "fakes", "verl_imitation")) == dump()


def test_the_profiled_worker_binds_in_verls_worker_group_as_verls_worker():
    import ray
    from verl.single_controller.base.decorator import MAGIC_ATTR
    from verl.single_controller.ray.base import RayClassWithInitArgs, create_colocated_worker_cls
    from verl.workers.engine_workers import ActorRolloutRefWorker

    from mindspeed_prof.integrations.verl import ProfiledActorRolloutRefWorker

    def bound(cls):
        group = create_colocated_worker_cls(
            {"actor_rollout_ref": RayClassWithInitArgs(cls=ray.remote(cls), config={},
                                                       role="actor_rollout_ref")})
        worker_dict = group.cls.__ray_actor_class__
        return {name: (getattr(getattr(worker_dict, name), MAGIC_ATTR),
                       inspect_async(getattr(worker_dict, name)))
                for name in dir(worker_dict) if name.startswith("actor_rollout_ref_")}

    ours, verls = bound(ProfiledActorRolloutRefWorker), bound(ActorRolloutRefWorker)
    assert "actor_rollout_ref_update_weights" in verls and ours == verls


def inspect_async(function):
    import inspect

    return inspect.iscoroutinefunction(function)


def test_a_changed_real_worker_shape_is_refused_with_the_version_and_what_is_missing():
    import verl
    from verl.single_controller.base.decorator import MAGIC_ATTR
    from verl.workers.engine_workers import ActorRolloutRefWorker
    from verl.workers.rollout.base import BaseRollout

    from mindspeed_prof.integrations.verl import shape

    class Changed(ActorRolloutRefWorker):  # update_weights as a plain sync method
        def update_weights(self, global_steps=None, mode="auto"):
            return None

    shape.check(verl.__version__, ActorRolloutRefWorker, MAGIC_ATTR, BaseRollout)  # the real one
    with pytest.raises(shape.UnknownVerlShape,
                       match=rf"verl {re.escape(verl.__version__)}'s differs: Changed."
                             rf"update_weights: not a worker method registered"):
        shape.check(verl.__version__, Changed, MAGIC_ATTR, BaseRollout)
