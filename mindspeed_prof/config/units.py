"""What the window flags count in each scenario (DESIGN §6): iterations in training, requests on
the static inference engine, engine steps on the dynamic one, the controller's RL steps in RL.
Trace step ids are these numbers."""

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
# One DynamicInferenceEngine step (an async_step, or a dummy forward the engine loop counts),
# numbered as the engine's own context.step_count numbers it (its step log prints the same).
ENGINE_STEP = Unit("engine step", "engine steps", "estep", "the engine")
UNITS = {u.name: u for u in (ITERATION, REQUEST, RL_STEP, ENGINE_STEP)}


def in_words(text: str, unit: Unit) -> str:
    """A message written for training (the window arithmetic's, the budget's), in ``unit``'s
    words: "iterations 2-3" -> "requests 2-3", "stops training" -> "stops the RL loop"."""
    if unit is ITERATION:
        return text
    text = text.replace("iterations", unit.plural).replace("iteration", unit.name)
    text = text.replace("until training ends", f"until {unit.owner} stops")
    text = text.replace("stops training", f"stops {unit.owner}")
    return text.replace("training", unit.owner)


def describe_window(schedule, unit: Unit = ITERATION, per_unit_sessions: bool = False) -> str:
    """A planned window in ``unit``'s words: "requests 2-3", "RL steps 10.. (until the RL loop
    stops)". With a session per unit there is no warm-up unit to mention."""
    text = schedule.describe()
    if per_unit_sessions:
        text = text.split(" (warm-up at ")[0]
    return in_words(text, unit)
