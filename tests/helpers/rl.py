"""Run one of the GRPO-shaped RL jobs of tests/harness/rl and collect what it left behind."""

import json
import os
import subprocess
import sys

from harness.launch import harness_env
from helpers.traces import step_ids, torch_traces

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_rl_job(tmp, module, role_yaml, steps, *extra, timeout=240, **env):
    """``python -m harness.rl.<module>`` with ``role_yaml`` (``{save}`` filled in) over ``steps``
    RL steps. Returns (the finished process, the save path, {role+rank: its worker report})."""
    save, reports = tmp / "prof", tmp / "reports"
    config = tmp / "rl.yaml"
    config.write_text(role_yaml.format(save=save))
    done = subprocess.run([sys.executable, "-m", f"harness.rl.{module}", "--config", str(config),
                           "--steps", str(steps), "--report-dir", str(reports), *extra],
                          capture_output=True, text=True, timeout=timeout, cwd=tmp,
                          env=harness_env(tmp, pythonpath=(TESTS,), **env))
    worker = {}
    for name in sorted(os.listdir(reports)) if reports.is_dir() else []:
        with open(reports / name) as handle:
            worker[name.removesuffix(".json")] = json.load(handle)
    return done, save, worker


def assert_every_role_ran_every_step(done, worker, steps):
    """The job exited 0 and each of its 4 role processes went through RL steps 1..steps."""
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert sorted(worker) == ["actor0", "actor1", "ref0", "rollout0"]
    for name, report in worker.items():
        assert report["steps"] == list(range(1, steps + 1)), name


def steps_by_folder(path):
    """{window folder (relative to path): step ids of its torch trace}."""
    return {os.path.relpath(os.path.dirname(t), path): step_ids(t) for t in torch_traces(str(path))}


def manifests(save):
    """(folder relative to save, manifest) for every rank manifest under ``save``."""
    for folder, _, files in os.walk(save):
        for name in files:
            if name.startswith("profile_manifest_rank"):
                with open(os.path.join(folder, name)) as handle:
                    yield os.path.relpath(folder, save), json.load(handle)
