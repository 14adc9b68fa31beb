"""Multi-node: two torchrun agents (two "nodes" of two workers) joined by c10d rendezvous on
127.0.0.1, writing to one shared save path. Ranks are selected and files named by global rank, so
ranks with the same local rank on different nodes never collide. (Megatron-LM's static form,
``--node-rank --master-addr``, one worker per node: ``test_launch_forms.py``.)"""

import os

import pytest

from harness.launch import run_nodes
from helpers.e2e import LAUNCHER, check, env_for, profile_flags, verdicts
from helpers.traces import manifest, torch_traces
from mindspeed_prof.layout import TORCH_TRACE_RE

pytestmark = pytest.mark.e2e


def test_two_nodes_profile_by_global_rank_into_one_save_path_without_collisions(tmp_path):
    save = tmp_path / "shared" / "prof"
    # rank 0 (node 0, local rank 0) and every rank of node 1 (ranks 2 and 3, local ranks 0, 1)
    run = run_nodes(profile_flags(save, ("0", "node=1"), 3, 5), tmp_path=tmp_path,
                    env=env_for(tmp_path), launcher_prefix=LAUNCHER, rendezvous="c10d").check()
    assert sorted(run.reports) == [0, 1, 2, 3]
    assert all(report["world_size"] == 4 for report in run.reports.values())

    manifests = {rank: manifest(save, rank) for rank in (0, 2, 3)}
    assert not (save / "profile_manifest_rank1.json").exists()
    assert {rank: data["local_rank"] for rank, data in manifests.items()} == {0: 0, 2: 0, 3: 1}
    assert all(data["rank"] == rank and data["selected_ranks"] == [0, 2, 3]
               for rank, data in manifests.items())

    traces = torch_traces(save)
    named = [TORCH_TRACE_RE.match(os.path.basename(path)) for path in traces]
    assert sorted(int(match.group(1)) for match in named) == [0, 2, 3]
    files = [f for data in manifests.values() for f in data["files"]]
    assert len(files) == len(set(files)) == 3
    assert sorted(os.path.join(save, f) for f in files) == sorted(traces)

    code, report = check(save)
    assert code == 0 and verdicts(report) == {0: "valid", 2: "valid", 3: "valid"}
