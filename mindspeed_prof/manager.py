"""Where the training code has always found its manager; the engine is ``recorder.py`` and the
training driver ``drivers/training.py`` (DESIGN §6)."""

from .drivers.training import ProfilerManager
from .recording.startup import check_save_path, preflight

__all__ = ["ProfilerManager", "check_save_path", "preflight"]
