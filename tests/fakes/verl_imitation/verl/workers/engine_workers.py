"""verl/workers/engine_workers.py's ActorRolloutRefWorker (0.9.1): one worker for actor, rollout
and ref, each method registered for dispatch; ``update_weights`` is async and takes
``global_steps``. The engines are one torch Linear each (actor trains it, ref is a frozen copy).

``FAKE_VERL_SHAPE`` (read at import) changes the shape the way a verl release could:
``log-prob-renamed`` (compute_log_prob is compute_actor_log_prob), ``sync-update-weights``,
``no-global-steps`` (update_weights(mode)), ``unregistered-update`` (update_actor without
@register).
"""

import os

import torch

from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import (Dispatch, make_nd_compute_dataproto_dispatch_fn,
                                                   register)
from verl.utils.profiler import DistProfiler, DistProfilerExtension
from verl.workers.rollout.base import get_rollout_class

SHAPE = os.environ.get("FAKE_VERL_SHAPE", "0.9.1")
_SHAPES = ("0.9.1", "log-prob-renamed", "sync-update-weights", "no-global-steps",
           "unregistered-update")
if SHAPE not in _SHAPES:
    raise ValueError(f"FAKE_VERL_SHAPE={SHAPE!r}: use one of {', '.join(_SHAPES)}")


class ActorRolloutRefWorker(Worker, DistProfilerExtension):
    def __init__(self, config, role, distillation_config=None, **kwargs):
        Worker.__init__(self)
        self.config, self.role = config, role
        self.actor = self.ref = self.rollout = None
        assert role in ["actor", "rollout", "ref", "actor_rollout", "actor_rollout_ref"]
        self._is_actor = role in ["actor", "actor_rollout", "actor_rollout_ref"]
        self._is_rollout = role in ["rollout", "actor_rollout", "actor_rollout_ref"]
        self._is_ref = role in ["ref", "actor_rollout_ref"]
        block = "actor" if self._is_actor else "rollout" if self._is_rollout else "ref"
        profiler = (config.get(block) or {}).get("profiler") or {}
        DistProfilerExtension.__init__(self, DistProfiler(rank=self.rank, config=profiler,
                                                          save_file_prefix=role))
        self.calls = []  # (method, result) for tests: the work each call did

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self):
        torch.manual_seed(1234)
        if "ref" in self.role:
            self.ref = torch.nn.Linear(8, 8)
        if "actor" in self.role:
            self.actor = torch.nn.Linear(8, 8)
            if self.ref is not None:
                self.ref.load_state_dict(self.actor.state_dict())
            self.optimizer = torch.optim.SGD(self.actor.parameters(), lr=0.1)
        if "rollout" in self.role:
            rollout_cls = get_rollout_class((self.config.get("rollout") or {}).get("name"))
            self.rollout = rollout_cls(config=self.config.get("rollout"), model_config=None,
                                       device_mesh=None)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="ref"))
    def compute_ref_log_prob(self, data):
        with torch.no_grad():
            return torch.log_softmax(self.ref(data["x"]), -1)

    def _compute_log_prob(self, data):
        with torch.no_grad():
            return torch.log_softmax(self.actor(data["x"]), -1)

    def _update_actor(self, data):
        self.optimizer.zero_grad()
        loss = -(torch.log_softmax(self.actor(data["x"]), -1) * data["advantage"]).mean()
        loss.backward()
        self.optimizer.step()
        return float(loss)

    async def _update_weights(self, global_steps=None, mode="auto"):
        if self.rollout is not None:
            await self.rollout.update_weights(
                ((n, p.detach().clone()) for n, p in self.actor.named_parameters()),
                global_steps=global_steps)

    if SHAPE == "log-prob-renamed":
        compute_actor_log_prob = register(
            dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="actor"))(_compute_log_prob)
    else:
        compute_log_prob = register(
            dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="actor"))(_compute_log_prob)
    if SHAPE == "unregistered-update":
        update_actor = _update_actor
    else:
        update_actor = register(
            dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="actor"))(_update_actor)
    if SHAPE == "sync-update-weights":
        @register(dispatch_mode=Dispatch.ONE_TO_ALL)
        def update_weights(self, global_steps=None, mode="auto"):
            return None
    elif SHAPE == "no-global-steps":
        @register(dispatch_mode=Dispatch.ONE_TO_ALL, blocking=False)
        async def update_weights(self, mode="auto"):
            return await self._update_weights(None, mode)
    else:
        update_weights = register(dispatch_mode=Dispatch.ONE_TO_ALL, blocking=False)(
            _update_weights)
