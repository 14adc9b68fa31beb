"""``mindspeed_prof.role_profiler``: the RL entry point, called from a role's worker process.

An entry point like ``launch`` and ``auto``: it reads the role's configuration through
``arguments/`` (the training YAML's checks, plus the ``roles:`` mapping) and hands a validated
ProfilerConfig to the core's role driver (``drivers/roles.py``). Never call it in a controller
that computes nothing: a profiler belongs to the process that computes.
"""

from typing import TYPE_CHECKING, Optional

from .drivers.roles import RLStepDriver

if TYPE_CHECKING:
    from .arguments.roles import ConfigSource


def role_profiler(role: str, config: "ConfigSource" = None, *, rank: Optional[int] = None,
                  world_size: Optional[int] = None, total_steps: Optional[int] = None
                  ) -> RLStepDriver:
    """The profiler of ``role`` in this process.

    ``config``: a role YAML path, a dict of the same shape, a ProfilerConfig, or None (the role
    YAML ``MINDSPEED_PROF_CONFIG`` names, if set, and ``MINDSPEED_PROF_*`` variables). ``rank`` defaults to this process's rank in the default
    process group, else ``RANK``, else 0. ``total_steps`` (the controller's number of RL steps)
    lets windows that cannot complete be refused now. Raises ConfigError (a ValueError) naming
    the file, role or key and the fix."""
    from .arguments.roles import role_config

    return RLStepDriver(role, role_config(role, config), rank=rank, world_size=world_size,
                        total_steps=total_steps)
