"""One RL role process's run, done in the calling process (the role-output tests and the
report's and timeline's tests build role layouts with it)."""

import time

import torch

import mindspeed_prof


def profile_role(save, role, rank, stages=("generate",), slow_s=0.0, **block):
    """One role process's run (rank ``rank`` of 2), done in this process."""
    config = {"profile": True, "profile_save_path": str(save), "profile_backend": "torch",
              "roles": {role: {"profile_steps": "2", "profile_ranks": "0-1", **block}}}
    with mindspeed_prof.role_profiler(role, config, rank=rank, world_size=2,
                                      total_steps=2) as prof:
        for g in (1, 2):
            with prof.step(g):
                for stage in stages:
                    with prof.stage(stage):
                        torch.randn(16, 16).sum()
                        time.sleep(slow_s)
