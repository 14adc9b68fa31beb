"""The verl imitation (tests/fakes/verl_imitation) and the order in which verl 0.9.1's
``RayPPOTrainer.fit`` calls a colocated worker, for the integration's unit tests.

``fit`` calls, per RL step g (``ray_trainer.py``; verified on the real loop by
tests/e2e/test_real_verl.py): ``start_profile(role="train", profile_step=g)`` on the steps of
``global_profiler.steps``; generation (the cpu_hf replica's one ``generate_sequences`` call per
step, with the data's weight version g-1 in ``meta_info``); ``compute_log_prob``,
``compute_ref_log_prob``, ``update_actor``; ``update_weights(global_steps=g)``; a validation
(generation with ``validate``, then ``update_weights(global_steps=g)`` again) when asked; then
``stop_profile``. Before step 1 (or the resumed step) it syncs with ``update_weights(start)``.
"""

import asyncio
import importlib
import os
import sys

import torch

IMITATION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "fakes", "verl_imitation")
INTEGRATION = "mindspeed_prof.integrations.verl"


def drop_verl_modules():
    for name in list(sys.modules):
        if name == "verl" or name.startswith("verl.") or name.startswith(INTEGRATION + "."):
            if name not in (INTEGRATION + ".settings", INTEGRATION + ".shape",
                            INTEGRATION + ".steps"):
                del sys.modules[name]


def load_worker_module(monkeypatch, shape="0.9.1", version="0.9.1"):
    """The integration's worker module over a freshly imported imitation of ``shape``."""
    monkeypatch.setenv("FAKE_VERL_SHAPE", shape)
    monkeypatch.setenv("FAKE_VERL_VERSION", version)
    drop_verl_modules()
    monkeypatch.syspath_prepend(IMITATION)
    return importlib.import_module(INTEGRATION + ".worker")


def worker_config(mindspeed_prof=None, rollout="cpu_hf", total_steps=-1, **profilers):
    """The worker's ``actor_rollout_ref`` config as plain mappings (verl hands a DictConfig)."""
    config = {"actor": {"optim": {"total_training_steps": total_steps}, "profiler": {}},
              "ref": {"profiler": {}}, "rollout": {"name": rollout, "mode": "async",
                                                   "profiler": {}}}
    for role, block in profilers.items():
        config[role]["profiler"] = block
    if mindspeed_prof is not None:
        config["mindspeed_prof"] = mindspeed_prof
    return config


def batch(step):
    generator = torch.Generator().manual_seed(step)
    return {"x": torch.randn(4, 8, generator=generator),
            "advantage": torch.randn(4, 8, generator=generator)}


def fit(worker, steps, start=0, profile_steps=(), validate_after=()):
    """Drive ``worker`` as RayPPOTrainer.fit does; returns each step's outputs."""
    from verl.protocol import DataProto

    run = asyncio.run
    outputs = []
    run(worker.update_weights(global_steps=start))
    for step in range(start + 1, start + steps + 1):
        if step in profile_steps:
            worker.start_profile(role="train", profile_step=step)
        data = batch(step)
        if worker.rollout is not None and hasattr(worker.rollout, "module"):
            worker.rollout.generate_sequences(
                DataProto(batch={"x": data["x"]}, meta_info={"global_steps": step - 1}))
        old = worker.compute_log_prob(data)
        ref = worker.compute_ref_log_prob(data)
        loss = worker.update_actor(data)
        run(worker.update_weights(global_steps=step))
        if step in validate_after:
            worker.rollout.generate_sequences(
                DataProto(batch={"x": data["x"]}, meta_info={"validate": True}))
            run(worker.update_weights(global_steps=step))
        if step in profile_steps:
            worker.stop_profile(run_command=step == max(profile_steps))
        outputs.append((old, ref, loss))
    return outputs
