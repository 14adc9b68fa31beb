"""The colocated worker's role profilers and the RL step they count (no verl import here).

The step is the controller's ``global_steps``, as verl 0.9.1's RayPPOTrainer carries it to the
worker: ``fit()`` syncs the rollout's weights with ``update_weights(global_steps=0)`` before
step 1 and with ``update_weights(global_steps=g)`` at the end of step g (and again with the same
g after a validation), so the work between two syncs belongs to step "last synced + 1". A resumed
run syncs with the step it resumed at first, so the numbering stays the trainer's. (The
``global_steps`` field of the worker's data is the weight version each sample was generated
with, one behind: not the step.)
"""

import contextlib
from typing import Dict, Optional

from mindspeed_prof.drivers.roles import RoleProfiler

_NOTHING = contextlib.nullcontext()


class StepOrderError(RuntimeError):
    """verl's controller called the worker in an order verl 0.9.1's does not."""


class WorkerProfilers:
    """``stage(role, name)`` around each worker method; ``weights_synced(g)`` after each
    ``update_weights``; ``verl_started(g)`` when verl's trainer starts its profile step g."""

    def __init__(self, profilers: Dict[str, RoleProfiler], version: str = "?"):
        self.profilers = {role: prof for role, prof in profilers.items() if not prof.idle}
        self.idle_profilers = profilers
        self.version = version
        self.last_synced: Optional[int] = None

    @property
    def active(self) -> bool:
        return bool(self.profilers)

    def roles(self):
        return tuple(self.profilers)

    def weights_synced(self, global_steps) -> None:
        if not self.active:
            return
        if global_steps is None:
            raise StepOrderError(
                f"verl {self.version} called update_weights() without global_steps; "
                f"mindspeed_prof numbers RL steps by it (verl 0.9.1's RayPPOTrainer.fit passes "
                f"it on every sync): this trainer is not one the integration knows "
                f"(trainer.use_v1=true?); use trainer.use_v1=false.")
        self.last_synced = int(global_steps)

    def step(self, what: str) -> int:
        if self.last_synced is None:
            raise StepOrderError(
                f"verl {self.version} ran {what} before any update_weights(global_steps=...): "
                f"mindspeed_prof numbers RL steps by the controller's weight syncs, which verl "
                f"0.9.1's RayPPOTrainer.fit does before step 1; this loop is not one the "
                f"integration knows.")
        return self.last_synced + 1

    def stage(self, role: str, name: str):
        prof = self.profilers.get(role)
        if prof is None:
            return _NOTHING
        return _Stage(prof, self.step(f"{role}'s {name}"), name)

    def verl_started(self, profile_step) -> None:
        """verl's trainer numbers its profiled steps itself: they must be ours."""
        if not self.active or profile_step is None:
            return
        if self.last_synced is not None and int(profile_step) != self.last_synced + 1:
            raise StepOrderError(
                f"verl {self.version} started profile step {profile_step}, but the last "
                f"update_weights was for step {self.last_synced}, so mindspeed_prof counts step "
                f"{self.last_synced + 1}: this trainer numbers steps differently from verl "
                f"0.9.1's RayPPOTrainer.fit.")

    def close(self, reason: str = "finished") -> None:
        for prof in self.idle_profilers.values():
            prof.close(reason)


class _Stage:
    """``with prof.step(g), prof.stage(name)`` as one context (each method is one stage)."""

    __slots__ = ("prof", "number", "name", "outer", "inner")

    def __init__(self, prof, number, name):
        self.prof, self.number, self.name = prof, number, name
        self.outer = self.inner = None

    def __enter__(self):
        self.outer = self.prof.step(self.number)
        self.outer.__enter__()
        try:
            self.inner = self.prof.stage(self.name)
            self.inner.__enter__()
        except BaseException:
            self.outer.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.inner.__exit__(exc_type, exc, tb)
        finally:
            self.outer.__exit__(exc_type, exc, tb)
        return False
