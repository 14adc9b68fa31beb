"""What the window flags count in each scenario (DESIGN §6): iterations in training, requests in
inference, the controller's RL steps in RL. Trace step ids are these numbers."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    """What the window flags count in one scenario, and how messages and folders name it."""

    name: str      # "iteration"
    plural: str    # "iterations"
    prefix: str    # window folders: {prefix}_{first}-{last}
    owner: str     # what ends: "training ended inside the window"


ITERATION = Unit("iteration", "iterations", "iter", "training")
REQUEST = Unit("request", "requests", "req", "the server")
RL_STEP = Unit("RL step", "RL steps", "step", "the RL loop")
UNITS = {u.name: u for u in (ITERATION, REQUEST, RL_STEP)}
