"""One job is one run, however it was launched: the forms the upstream scripts use.

Megatron-LM's and MindSpeed-LLM's example scripts start torchrun with ``--nnodes --node-rank
--master-addr --master-port`` (no ``--standalone``, no ``--rdzv-id``: torchrun hands its workers
no run id), MindSpeed-LLM's generate scripts with ``python -m torch.distributed.launch`` (the
script receives ``--local-rank``), a multi-node job starts one torchrun agent per node, and
SLURM jobs run torchrun inside srun. Each job here profiles both of its ranks and must come out
of ``check`` as one run: every rank traced with its step ids, every rank valid, exit 0.
"""

import contextlib
import io
import os

import pytest

from harness.launch import run_nodes
from helpers.e2e import LAUNCHER, check, env_for, profile_flags, train, verdicts
from helpers.traces import manifest, step_ids, torch_traces
from mindspeed_prof import cli

pytestmark = pytest.mark.e2e

START, END = 3, 5
RANKS = (0, 1)


def flags(save):
    return profile_flags(save, ("all",), START, END)


def check_text(save, *extra):
    """(exit code, stdout) of ``mindspeed-prof check SAVE ...`` as a user reads it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["check", str(save), *map(str, extra)])
    return code, out.getvalue()


def traced_steps(save):
    """Rank -> the step ids of its trace(s) under ``save``."""
    steps = {}
    for path in torch_traces(save):
        rank = int(os.path.basename(path).split(".")[0].removeprefix("rank"))
        steps.setdefault(rank, []).extend(step_ids(path))
    return steps


def assert_one_run(save, ranks=RANKS):
    assert traced_steps(save) == {rank: list(range(START, END)) for rank in ranks}
    code, text = check_text(save)
    assert "runs wrote into this directory" not in text, text
    assert code == 0, text
    code, report = check(save)
    assert code == 0 and verdicts(report) == {rank: "valid" for rank in ranks}, report
    assert not report["warnings"], report["warnings"]


def test_torchrun_with_master_addr_as_megatron_lms_examples_is_one_run(tmp_path):
    # before: "2 runs wrote into this directory", one healthy rank missing, exit 1
    save = tmp_path / "prof"
    run = train(tmp_path, flags(save), form="master").check()
    assert "--master-addr" in run.command and "--standalone" not in run.command
    assert_one_run(save)
    sources = {manifest(save, rank)["run_id_source"] for rank in RANKS}
    assert sources == {"job-store"}


def test_torch_distributed_launch_whose_script_gets_local_rank_is_one_run(tmp_path):
    # MindSpeed-LLM's generate scripts: python -m torch.distributed.launch --nproc_per_node N
    # --master_port P; without --use-env each worker's arguments begin with --local-rank=N
    # before: as above, one rank missing, exit 1
    save = tmp_path / "prof"
    run = train(tmp_path, flags(save), form="launch").check()
    assert "torch.distributed.launch" in run.command and "--use-env" not in run.command
    assert {rank: manifest(save, rank)["local_rank"] for rank in RANKS} == {0: 0, 1: 1}
    assert_one_run(save)


def two_nodes(tmp_path, **kwargs):
    """Two torchrun agents on this machine as two nodes: --nnodes 2 --node-rank 0|1
    --master-addr 127.0.0.1, one worker each."""
    return run_nodes(tmp_path=tmp_path, nnodes=2, nproc=1, env=env_for(tmp_path),
                     launcher_prefix=LAUNCHER, rendezvous="static", **kwargs).check()


def test_two_torchrun_agents_as_two_nodes_into_one_shared_save_path_are_one_run(tmp_path):
    # before: as above, one rank missing, exit 1
    save = tmp_path / "shared" / "prof"
    run = two_nodes(tmp_path, args=flags(save))
    assert "--node-rank" in run.command and sorted(run.reports) == [0, 1]
    assert_one_run(save)


def test_two_torchrun_agents_with_node_local_save_paths_check_per_node_and_merge_to_one_run(
        tmp_path):
    saves = [tmp_path / f"node{node}" / "prof" for node in (0, 1)]
    two_nodes(tmp_path, args=flags(saves[0]),
              node_args=lambda node: ["--profile-save-path", saves[node]])
    reports = []
    for node, save in enumerate(saves):
        assert traced_steps(save) == {node: list(range(START, END))}
        report = tmp_path / "reports" / f"node{node}.json"
        code, text = check_text(save, "--node", f"{node}/2", "--report", report)
        assert code == 0 and "runs wrote into this directory" not in text, text
        reports.append(report)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["merge", *map(str, reports)])
    text = out.getvalue()
    assert code == 0 and "2 valid (2 checked): exit 0" in text, text
    assert "runs wrote into this directory" not in text and "runs in these node reports" \
        not in text, text


def test_torchrun_inside_a_slurm_environment_set_by_hand_is_one_run(tmp_path):
    # srun --ntasks=1 torchrun --nnodes 1 --node-rank 0 --master-addr ...: SLURM's variables
    # around torchrun's own
    save = tmp_path / "prof"
    env = env_for(tmp_path, SLURM_JOB_ID="4242", SLURM_PROCID="0", SLURM_NTASKS="1",
                  SLURM_STEP_ID=None)
    train(tmp_path, flags(save), env=env, form="master").check()
    assert_one_run(save)
    # no srun step: the ranks agree through torchrun's store (two torchruns in one allocation's
    # shell are two jobs), not on the allocation's id
    ids = {(manifest(save, rank)["run_id"], manifest(save, rank)["run_id_source"])
           for rank in RANKS}
    assert len(ids) == 1 and {source for _, source in ids} == {"job-store"}, ids


ROLE_SCRIPT = """
import sys, torch, torch.distributed as dist, mindspeed_prof
dist.init_process_group("gloo")
cfg = {"profile": True, "profile_save_path": sys.argv[1], "profile_backend": "torch",
       "roles": {"actor": {"profile_steps": "3-4", "profile_ranks": "all"}}}
prof = mindspeed_prof.role_profiler("actor", cfg)
for step in range(1, 6):
    with prof.step(step):
        (torch.randn(16, 16) @ torch.randn(16, 16)).sum()
        dist.barrier()
prof.close()
dist.destroy_process_group()
"""


def test_an_rl_roles_ranks_under_torchrun_with_master_addr_are_one_run(tmp_path):
    # before: "actor rank 0 missing" (or 1), "2 runs wrote into this directory", exit 1
    save = tmp_path / "prof"
    script = tmp_path / "actor.py"
    script.write_text(ROLE_SCRIPT)
    train(tmp_path, [save], launcher=(), script=script, with_default_args=False,
          form="master").check()
    assert traced_steps(save / "actor") == {rank: list(range(START, END)) for rank in RANKS}
    code, text = check_text(save)
    assert "runs wrote into this directory" not in text, text
    assert code == 0 and "2 of 2 (role, rank) valid: exit 0" in text, text
