"""Two jobs writing into one save path (the default ./profile_dir makes it common): the second
never overwrites the first one's manifest; `check` and `summary` judge each rank by its newest
run and name the runs they left out."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from helpers.cli import rank_entry, run_cli, run_cli_json
from helpers.traces import manifest, torch_traces

JOB = textwrap.dedent("""
    import sys, torch
    import mindspeed_prof
    config = mindspeed_prof.ProfilerConfig(
        profile=True, profile_step_start=2, profile_step_end=int(sys.argv[2]),
        profile_save_path=sys.argv[1], profile_backend="torch", profile_ranks=[0])
    with mindspeed_prof.profile(config, rank=0, world_size=1) as prof:
        for iteration in range(1, 5):
            torch.randn(8, 8).sum()
            prof.step()
""")


def job(save, run_id, end):
    """One job (its own process), as torchrun would start it with its run id."""
    env = {**os.environ, "TORCHELASTIC_RUN_ID": run_id}
    env.pop("SLURM_JOB_ID", None)
    done = subprocess.run([sys.executable, "-c", JOB, str(save), str(end)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def manifests(save):
    return sorted(n for n in os.listdir(save) if n.startswith("profile_manifest_rank"))


@pytest.fixture(scope="module")
def two_jobs(tmp_path_factory):
    """A whole run (iterations 2-3), then a second job whose loop ends inside its window."""
    save = tmp_path_factory.mktemp("two_jobs") / "profile_dir"
    job(save, "first-job", 4)
    first = (save / "profile_manifest_rank0.json").read_text()
    job(save, "second-job", 9)
    return save, first


def test_a_second_job_in_the_same_save_path_never_overwrites_the_first_jobs_manifest(two_jobs):
    save, first = two_jobs
    assert manifests(save) == ["profile_manifest_rank0.json",
                               "profile_manifest_rank0.second-job.json"]
    assert (save / "profile_manifest_rank0.json").read_text() == first
    assert json.loads(first)["run_id"] == "first-job"
    assert manifest(save, 0)["run_id"] == "second-job"
    assert len(torch_traces(save)) == 2


def test_check_judges_a_rank_by_its_newest_run_and_names_the_other(two_jobs, capsys):
    save, _ = two_jobs
    code, report = run_cli_json(capsys, "check", save)
    entry = rank_entry(report, 0)
    assert code == 1 and entry["verdict"] == "cut"
    assert entry["manifest"] == "profile_manifest_rank0.second-job.json"
    assert len(entry["runs"]) == 1  # the first job's trace is not merged in
    note = " | ".join(report["warnings"])
    assert "2 runs wrote into this directory" in note and "run first-job" in note
    assert "profile_manifest_rank0.json" in note


def test_summary_reads_the_newest_run_and_names_the_other(two_jobs, capsys):
    save, _ = two_jobs
    code, out, _ = run_cli(capsys, "summary", save)
    assert code == 0
    assert "2 runs wrote into this directory" in out and "run first-job" in out


def test_a_process_that_profiles_twice_rewrites_its_own_manifest(tmp_path):
    # The same process (an in-process restart) is the same run: no second file.
    from mindspeed_prof.manifest import Manifest
    from mindspeed_prof import ProfilerConfig

    path = str(tmp_path / "profile_manifest_rank0.json")
    for _ in range(2):
        Manifest(path, rank=0, world_size=1, backend="torch",
                 config=ProfilerConfig(profile=True)).save()
    assert manifests(tmp_path) == ["profile_manifest_rank0.json"]


@pytest.mark.e2e
def test_the_ranks_of_a_torchrun_job_without_a_run_id_share_one_through_the_job_store(tmp_path):
    # torchrun without --standalone/--rdzv-id sets TORCHELASTIC_RUN_ID=none: each rank would be
    # a run of its own (host-pid), so one job would look like as many runs as it has ranks.
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:  # a free port (torchrun's --master-port 0 hangs)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = tmp_path / "ids.py"
    script.write_text("import torch.distributed as dist\n"
                      "dist.init_process_group('gloo')\n"
                      "from mindspeed_prof.run_id import job_run_id\n"
                      "print('RUN', dist.get_rank(), job_run_id(), flush=True)\n"
                      "dist.destroy_process_group()\n")
    env = dict(os.environ, TORCHELASTIC_RUN_ID="none")
    env.pop("SLURM_JOB_ID", None)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-addr", "127.0.0.1", "--master-port", str(port), str(script)], capture_output=True, text=True,
                          env=env, timeout=120)
    ids = {line.split()[1]: line.split()[2] for line in done.stdout.splitlines()
           if line.startswith("RUN ")}
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(ids) == ["0", "1"] and len(set(ids.values())) == 1
