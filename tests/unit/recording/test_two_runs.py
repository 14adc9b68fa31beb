"""Two jobs writing into one save path (the default ./profile_dir makes it common): the second
never overwrites the first one's manifest; `check` and `summary` judge each rank by its newest
run and name the runs they left out."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from helpers.cli import rank_entry, run_cli, run_cli_json
from helpers.traces import manifest, torch_traces
from output_fixtures import samples
from output_fixtures.torch_traces import torch_trace

JOB = textwrap.dedent("""
    import sys, torch
    import mindspeed_prof
    rank, ranks = int(sys.argv[3]), [int(r) for r in sys.argv[4].split(",")]
    config = mindspeed_prof.ProfilerConfig(
        profile=True, profile_step_start=2, profile_step_end=int(sys.argv[2]),
        profile_save_path=sys.argv[1], profile_backend="torch", profile_ranks=ranks)
    with mindspeed_prof.profile(config, rank=rank, world_size=max(ranks) + 1) as prof:
        for iteration in range(1, 5):
            torch.randn(8, 8).sum()
            prof.step()
""")


def job(save, run_id, end, ranks=(0,)):
    """One job, as torchrun would start it with its run id: a process per rank (one after the
    other: the ranks never talk)."""
    env = {**os.environ, "TORCHELASTIC_RUN_ID": run_id}
    env.pop("SLURM_JOB_ID", None)
    for rank in ranks:
        done = subprocess.run([sys.executable, "-c", JOB, str(save), str(end), str(rank),
                               ",".join(map(str, ranks))], env=env,
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


@pytest.mark.slow  # the module's two jobs, a process per rank (`two_jobs`)
def test_a_second_job_in_the_same_save_path_never_overwrites_the_first_jobs_manifest(two_jobs):
    save, first = two_jobs
    assert manifests(save) == ["profile_manifest_rank0.json",
                               "profile_manifest_rank0.second-job.json"]
    assert (save / "profile_manifest_rank0.json").read_text() == first
    assert json.loads(first)["run_id"] == "first-job"
    assert manifest(save, 0)["run_id"] == "second-job"
    assert len(torch_traces(save)) == 2


@pytest.mark.slow  # the module's two jobs, a process per rank (`two_jobs`)
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


@pytest.mark.slow  # the module's two jobs, a process per rank (`two_jobs`)
def test_summary_reads_the_newest_run_and_names_the_other(two_jobs, capsys):
    save, _ = two_jobs
    code, out, _ = run_cli(capsys, "summary", save)
    assert code == 0
    assert "2 runs wrote into this directory" in out and "run first-job" in out


@pytest.fixture(scope="module")
def fewer_ranks(tmp_path_factory):
    """Job A profiles ranks 0 and 1 (whole windows); job B, later, rank 0 only."""
    save = tmp_path_factory.mktemp("fewer_ranks") / "profile_dir"
    job(save, "job-a", 4, ranks=(0, 1))
    job(save, "job-b", 4, ranks=(0,))
    return save


@pytest.mark.slow  # the module's two jobs, a process per rank (`fewer_ranks`)
def test_a_newer_job_that_profiles_fewer_ranks_is_judged_alone_not_mixed_with_the_older(
        fewer_ranks, capsys):
    # before: rank 0 judged by job B, rank 1 by job A, one verdict "2 valid", exit 0
    code, report = run_cli_json(capsys, "check", fewer_ranks)
    assert report["run"] == "job-b"
    assert [r["rank"] for r in report["ranks"]] == [0] and report["expected_ranks"] == [0]
    assert rank_entry(report, 0)["manifest"] == "profile_manifest_rank0.job-b.json"
    note = " | ".join(report["warnings"])
    assert "2 runs wrote into this directory: judged the newest run, run job-b" in note
    assert "left out run job-a" in note and "rank(s) 0, 1" in note and "--run ID" in note
    assert code == 0


@pytest.mark.slow  # the module's two jobs, a process per rank (`fewer_ranks`)
def test_summary_reads_the_newer_job_alone(fewer_ranks, capsys):
    code, data = run_cli_json(capsys, "summary", fewer_ranks)
    assert code == 0 and data["run"] == "job-b"
    assert [r["rank"] for r in data["ranks"]] == [0]
    assert len(data["ranks"][0]["sources"]) == 1


@pytest.mark.slow  # the module's two jobs, a process per rank (`fewer_ranks`)
def test_run_picks_an_older_job_whole(fewer_ranks, capsys):
    code, report = run_cli_json(capsys, "check", fewer_ranks, "--run", "job-a")
    assert code == 0 and report["run"] == "job-a"
    assert [(r["rank"], r["verdict"]) for r in report["ranks"]] == [(0, "valid"), (1, "valid")]
    assert rank_entry(report, 0)["manifest"] == "profile_manifest_rank0.json"
    assert "left out run job-b" in " | ".join(report["warnings"])
    code, data = run_cli_json(capsys, "summary", fewer_ranks, "--run", "job-a")
    assert code == 0 and [r["rank"] for r in data["ranks"]] == [0, 1]


@pytest.mark.slow  # the module's two jobs, a process per rank (`fewer_ranks`)
def test_a_run_id_that_no_manifest_has_is_a_usage_error_listing_the_runs(fewer_ranks, capsys):
    code, _, err = run_cli(capsys, "check", fewer_ranks, "--run", "job-c")
    assert code == 2 and "--run job-c: no manifest here has that run id" in err
    assert "run job-a (started" in err and "run job-b (started" in err


def test_run_on_a_folder_without_manifests_is_a_usage_error(tmp_path, capsys):
    torch_trace(tmp_path, rank=0)
    code, _, err = run_cli(capsys, "summary", tmp_path, "--run", "job-a")
    assert code == 2 and "no readable profile_manifest_rank*.json here" in err


def write_run(save, rank, run_id, started_ns, trace, **fields):
    """A manifest of ``run_id`` for ``rank`` listing ``trace`` (written as a job would)."""
    samples.write_run_manifest(save, rank, run_id, started_ns, [trace], **fields)


def test_manifests_without_a_shared_run_id_are_split_into_jobs_by_when_they_started(tmp_path,
                                                                                    capsys):
    # an older mindspeed_prof: each rank's run id is its own host-pid. Job A (ranks 0, 1) at
    # t, t+1 s; job B (rank 1 only) 100 s later: rank 1 seen twice splits them at the gap
    save = tmp_path / "profile_dir"
    t = 1_700_000_000 * 10**9
    for rank, start, pid, selected in ((0, t, 10, [0, 1]), (1, t + 10**9, 11, [0, 1]),
                                       (1, t + 100 * 10**9, 21, [1])):
        trace = torch_trace(save / f"job{pid // 10}", rank=rank, start=2, end=4)
        write_run(save, rank, f"node-{pid}", start, trace, pid=pid, selected_ranks=selected)
    code, report = run_cli_json(capsys, "check", save)
    assert report["run"] == "node-21" and report["expected_ranks"] == [1]
    assert [(r["rank"], r["manifest"]) for r in report["ranks"]] == [
        (1, "profile_manifest_rank1.node-21.json")]
    assert report["ranks"][0]["runs"][0]["path"].startswith("job2")
    assert "left out run node-10 (+1 processes without a shared run id)" in \
        " | ".join(report["warnings"])
    assert code == 0


def test_a_restarted_rank_of_one_run_is_judged_by_its_newest_manifest(tmp_path, capsys):
    # torchrun restarted the workers: same run id, new processes, a second manifest per rank
    save = tmp_path / "profile_dir"
    t = 1_700_000_000 * 10**9
    first = torch_trace(save / "attempt0", rank=0, start=2, end=4)
    write_run(save, 0, "elastic-1", t, first, pid=10)
    second = torch_trace(save / "attempt1", rank=0, start=2, end=4)
    write_run(save, 0, "elastic-1", t + 60 * 10**9, second, pid=11)
    code, report = run_cli_json(capsys, "check", save)
    entry = rank_entry(report, 0)
    assert code == 0 and entry["manifest"] == "profile_manifest_rank0.elastic-1.json"
    assert [r["path"] for r in entry["runs"]] == [os.path.relpath(second, save)]
    assert "run elastic-1 wrote rank(s) 0 more than once (its workers restarted)" in \
        " | ".join(report["warnings"])


def test_a_process_that_profiles_twice_rewrites_its_own_manifest(tmp_path):
    # The same process (an in-process restart) is the same run: no second file.
    from mindspeed_prof.recording.manifest import Manifest
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
    # each rank writes its own file: two ranks printing to one pipe interleave their words
    script.write_text("import sys, torch.distributed as dist\n"
                      "dist.init_process_group('gloo')\n"
                      "from mindspeed_prof.recording.run_id import job_run_id\n"
                      "with open(f'{sys.argv[1]}/run_id_rank{dist.get_rank()}', 'w') as out:\n"
                      "    out.write(job_run_id())\n"
                      "dist.destroy_process_group()\n")
    env = dict(os.environ, TORCHELASTIC_RUN_ID="none")
    env.pop("SLURM_JOB_ID", None)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-addr", "127.0.0.1", "--master-port", str(port), str(script),
                           str(tmp_path)], capture_output=True, text=True, env=env, timeout=120)
    ids = {p.name[len("run_id_rank"):]: p.read_text() for p in tmp_path.glob("run_id_rank*")}
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(ids) == ["0", "1"] and len(set(ids.values())) == 1


# One job, whatever its run id looks like: the manifest says where the id came from.

def one_job_of_two_ranks(save, run_id, source, started_ns=1_700_000_000 * 10**9, folder="job"):
    """Ranks 0 and 1 of one job (hostname ``node``, pids 100 and 101) sharing ``run_id``."""
    for rank in (0, 1):
        trace = torch_trace(save / folder, rank=rank, start=2, end=4)
        write_run(save, rank, run_id, started_ns + rank * 10**8, trace, selected_ranks=[0, 1],
                  **({} if source is None else {"run_id_source": source}))


def test_ranks_that_agreed_on_a_run_id_through_the_job_store_are_one_run(tmp_path, capsys):
    # torchrun --master-addr (no run id from torchrun): the ranks agree on the first rank's
    # host-pid through the job's store, so rank 0's run id is spelled as its own host-pid.
    # before: rank 0 split off as a lone process, "2 runs wrote into this directory", rank 1
    # (or 0) missing, exit 1
    save = tmp_path / "profile_dir"
    one_job_of_two_ranks(save, "node-100", "job-store")
    code, out, _ = run_cli(capsys, "check", save)
    assert "runs wrote into this directory" not in out
    code, report = run_cli_json(capsys, "check", save)
    assert [(r["rank"], r["verdict"]) for r in report["ranks"]] == [(0, "valid"), (1, "valid")]
    assert report["run"] == "node-100" and code == 0
    code, data = run_cli_json(capsys, "summary", save)
    assert code == 0 and [r["rank"] for r in data["ranks"]] == [0, 1]


@pytest.mark.parametrize("source", ["torchelastic", "slurm"])
def test_a_shared_run_id_is_one_run_even_when_it_is_spelled_like_a_host_pid(tmp_path, capsys,
                                                                            source):
    save = tmp_path / "profile_dir"
    one_job_of_two_ranks(save, "node-101", source)
    code, report = run_cli_json(capsys, "check", save)
    assert code == 0 and [r["verdict"] for r in report["ranks"]] == ["valid", "valid"]
    assert not report["warnings"]


def test_lone_processes_are_split_into_jobs_by_when_they_started(tmp_path, capsys):
    # run_id_source "process": each rank's id is its own; a rank seen twice is a second job
    save = tmp_path / "profile_dir"
    t = 1_700_000_000 * 10**9
    for rank, start, pid in ((0, t, 10), (1, t + 10**9, 11), (0, t + 100 * 10**9, 20)):
        trace = torch_trace(save / f"job{pid // 10}", rank=rank, start=2, end=4)
        write_run(save, rank, f"node-{pid}", start, trace, pid=pid, selected_ranks=[0],
                  run_id_source="process")
    code, report = run_cli_json(capsys, "check", save)
    assert report["run"] == "node-20" and [r["rank"] for r in report["ranks"]] == [0]
    assert "left out run node-10 (+1 processes without a shared run id)" in \
        " | ".join(report["warnings"])
    assert code == 0


# Two torchrun jobs started one after the other in one SLURM allocation's shell (an sbatch
# script, salloc): SLURM_JOB_ID is set, SLURM_STEP_ID is not (no srun), torchrun hands no run id.
ALLOCATION_JOB = JOB.replace("import mindspeed_prof\n", textwrap.dedent("""\
    import mindspeed_prof
    import torch.distributed as dist
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    """), 1)


@pytest.mark.slow  # two jobs' rank processes, one after the other
def test_two_torchrun_jobs_in_one_slurm_allocation_without_srun_are_two_runs(tmp_path, capsys):
    # before: both wrote run id slurm4242 (source slurm): check took them for one run whose
    # workers restarted ("run slurm4242 wrote rank(s) 0 more than once")
    save = tmp_path / "profile_dir"
    env = {**os.environ, "SLURM_JOB_ID": "4242", "SLURM_PROCID": "0", "SLURM_NTASKS": "1",
           "TORCHELASTIC_RUN_ID": "none"}
    env.pop("SLURM_STEP_ID", None)
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", ALLOCATION_JOB, str(save), "4", "0", "0"],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    runs = [json.loads((save / name).read_text()) for name in manifests(save)]
    assert len(runs) == 2
    assert [r["run_id_source"] for r in runs] == ["job-store", "job-store"]
    assert len({r["run_id"] for r in runs}) == 2
    code, out, _ = run_cli(capsys, "check", save)
    assert "more than once" not in out and "workers restarted" not in out, out
    assert "2 runs wrote into this directory" in out and code == 0, out


def test_a_slurm_job_id_without_a_step_is_the_run_id_only_where_no_job_store_answers(
        monkeypatch):
    from mindspeed_prof.recording import run_id
    from mindspeed_prof.recording.run_id import job_run

    monkeypatch.setattr(run_id, "_shared_through_the_job_store", lambda own: None)
    assert job_run({"SLURM_JOB_ID": "42"}) == ("slurm42", "slurm")
    assert job_run({"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "3"}) == ("slurm42.3", "slurm")


def test_a_manifest_says_where_its_run_id_came_from(tmp_path, monkeypatch):
    from mindspeed_prof import ProfilerConfig
    from mindspeed_prof.recording.manifest import Manifest

    def written(**env):
        for key in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID"):
            monkeypatch.delenv(key, raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        path = tmp_path / f"{len(os.listdir(tmp_path))}" / "profile_manifest_rank0.json"
        path.parent.mkdir()
        manifest = Manifest(str(path), rank=0, world_size=1, backend="torch",
                            config=ProfilerConfig(profile=True))
        manifest.save()
        data = json.loads(path.read_text())
        return data["run_id"], data["run_id_source"]

    assert written(TORCHELASTIC_RUN_ID="a1b2") == ("a1b2", "torchelastic")
    assert written(TORCHELASTIC_RUN_ID="none", SLURM_JOB_ID="42", SLURM_STEP_ID="0") == \
        ("slurm42.0", "slurm")
    import socket
    assert written() == (f"{socket.gethostname()}-{os.getpid()}", "process")


# merge: reports of different runs are not one job, as check says of one folder

def node_reports(tmp_path, capsys, runs):
    """One node-local folder per (run id, started_ns, rank), checked as node I of N."""
    reports = []
    for node, (run_id, started_ns, rank) in enumerate(runs):
        local = tmp_path / f"node{node}" / "profile_dir"
        trace = torch_trace(local, rank=rank, start=2, end=4)
        write_run(local, rank, run_id, started_ns, trace, selected_ranks=[0, 1],
                  run_id_source="torchelastic")
        report = tmp_path / "reports" / f"node{node}.json"
        code, _, err = run_cli(capsys, "check", local, "--node", f"{node}/{len(runs)}",
                               "--report", report)
        assert code == 0, err
        reports.append(report)
    return reports


def test_merge_of_two_runs_judges_the_newest_and_calls_the_older_runs_ranks_missing(
        tmp_path, capsys):
    # node 1's node-local folder still holds an older job's rank 1
    # before: "2 valid", exit 0, with only a warning
    t = 1_700_000_000 * 10**9
    reports = node_reports(tmp_path, capsys, [("job-new", t + 100 * 10**9, 0),
                                              ("job-old", t, 1)])
    code, out, _ = run_cli(capsys, "merge", *reports)
    assert code == 1 and "1 valid, 1 missing" in out
    code, result = run_cli_json(capsys, "merge", *reports)
    check = result["check"]
    assert code == 1 and check["run"] == "job-new" and check["expected_ranks"] == [0, 1]
    assert [(r["rank"], r["verdict"]) for r in check["ranks"]] == [(0, "valid"), (1, "missing")]
    assert "node1.json holds run job-old" in " ".join(rank_entry(check, 1)["problems"])
    note = " | ".join(check["warnings"])
    assert "2 runs in these node reports (different jobs): judged the newest run, run job-new" \
        in note and "left out run job-old" in note and "rank(s) 1" in note
    assert [r["rank"] for r in result["summary"]["ranks"]] == [0]


def test_merge_of_one_runs_node_reports_is_one_job(tmp_path, capsys):
    t = 1_700_000_000 * 10**9
    reports = node_reports(tmp_path, capsys, [("job-1", t, 0), ("job-1", t + 10**8, 1)])
    code, result = run_cli_json(capsys, "merge", *reports)
    assert code == 0 and result["check"]["run"] == "job-1" and not result["check"]["warnings"]
    assert [r["verdict"] for r in result["check"]["ranks"]] == ["valid", "valid"]
