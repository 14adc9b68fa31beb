"""Profiling a plain training loop, the way torch_npu's single-card example reads::

    import mindspeed_prof
    config = mindspeed_prof.ProfilerConfig(profile=True, profile_step_start=3, profile_step_end=5)
    with mindspeed_prof.profile(config, train_iters=10) as prof:
        for iteration in range(1, 11):
            train_one_step()
            prof.step()

Iterations are 1-based like Megatron's log; ``first_iteration`` is where a resumed loop starts.
Rank and world size default to torch.distributed (when initialised) or torchrun's environment.
"""

from typing import Any, Literal, Optional

from .config.profiler_config import ProfilerConfig
from .drivers.training import TrainingDriver
from .recording.environment import rank_from_env
from .recording.exits import exit_reason


class profile:
    """The profiler of a plain loop (see the module docstring); a context manager."""

    def __init__(self, config: ProfilerConfig, *, train_iters: Optional[int] = None,
                 first_iteration: int = 1, exit_interval: Optional[int] = None,
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 parallel: Optional[dict] = None) -> None:
        self.config = config
        self.train_iters, self.first_iteration = train_iters, first_iteration
        self.exit_interval = exit_interval
        env_rank, env_world, local_rank = rank_from_env()
        self.rank = env_rank if rank is None else rank
        self.world_size = env_world if world_size is None else world_size
        self.local_rank = local_rank
        self.parallel = parallel
        self.iteration = first_iteration
        self.manager: Optional[TrainingDriver] = None
        # Inside the `with` block. Not `manager.closed`: a SIGTERM whose host handler lets the
        # loop go on closes the manager inside the block, and step() must not fail the loop.
        self._inside = False

    def __enter__(self) -> "profile":
        if self.manager is not None:
            # A second run would write over the first run's manifest and traces.
            raise RuntimeError("this mindspeed_prof.profile object has already run; create a new "
                               "mindspeed_prof.profile(...) for each profiled loop.")
        manager = TrainingDriver(self.config, rank=self.rank, world_size=self.world_size,
                                  local_rank=self.local_rank, parallel=self.parallel)
        manager.arm(first_iteration=self.first_iteration, train_iters=self.train_iters,
                    exit_interval=self.exit_interval)
        self.manager = manager  # only once armed: a refused start may be fixed and retried
        self._inside = True
        self.manager.step_begin(self.iteration)
        return self

    def step(self) -> None:
        """The current iteration finished; the next one begins."""
        if self.manager is None or not self._inside:
            raise RuntimeError("profile.step() was called outside its `with` block; call it "
                               "inside `with mindspeed_prof.profile(...) as prof:`.")
        self.manager.step_end(self.iteration)
        self.iteration += 1
        self.manager.step_begin(self.iteration)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        reason, detail = exit_reason(exc_type, exc)
        self._inside = False
        if self.manager is None:
            return False
        if exc_type is None:
            # The loop ended after its last step(): the iteration that step() began never ran,
            # so no ProfilerStep may stand for it.
            self.manager.retract(self.iteration)
        self.manager.close(reason, detail)
        return False
