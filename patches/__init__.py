"""Every Megatron / MindSpeed touch point of mindspeed_prof lives in this package."""

from .activate import activate, deactivate
from .registry import PatchRegistry
from .state import registry, state

__all__ = ["PatchRegistry", "activate", "deactivate", "registry", "state"]
