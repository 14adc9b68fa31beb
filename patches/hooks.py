"""The host hooks, by table: one row per host loop or engine that mindspeed_prof hooks.

A new host framework is one patch module here and one row below (docs/development.md's recipes);
nothing else names the hook functions. Rows are (module of this package, function) and import
lazily, so activating the patches stays cheap (no torch, no megatron until a hook installs).
"""

import importlib
from typing import Tuple

Hook = Tuple[str, str]

# Engines a plain megatron-core script builds without ``initialize_megatron`` (so no
# ``validate_args`` ever takes ownership): hooked as soon as the patches are active.
ENGINE_HOOKS: Tuple[Hook, ...] = (
    ("inference", "hook_inference"),
    ("dynamic_inference", "hook_dynamic_engine"),
    ("profile_routes", "hook_profile_routes"),
)
# Once profiling owns a Megatron job (validate_args): its training loop, Megatron-RL's iteration
# and stages (megatron.training imports megatron.rl when present, so it is there by now), and the
# engines above, since inference entry scripts parse and validate Megatron's args too.
OWNED_JOB_HOOKS: Tuple[Hook, ...] = (
    ("megatron_loop", "hook_training_loop"),
    ("megatron_rl", "hook_rl_loop"),
    ("megatron_schedules", "hook_schedules"),  # the pipeline schedule, marked in windows
) + ENGINE_HOOKS


def install(hooks: Tuple[Hook, ...]) -> None:
    """Install each hook of ``hooks`` (each is idempotent: the registry applies a patch once)."""
    for module, function in hooks:
        getattr(importlib.import_module(f"{__package__}.{module}"), function)()
