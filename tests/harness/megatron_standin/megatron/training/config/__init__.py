"""Megatron-LM >= 0.17's argument dataclasses (``megatron/training/config/``), reduced to the
profiling ones. Their field metadata builds the argparse flags (``argument_utils``)."""

from megatron.training import _harness

if _harness.VERSION < (0, 17):
    raise ImportError("megatron.training.config does not exist in Megatron-LM "
                      f"{_harness.VERSION_STRING}")

from .common_config import ProfilingConfig  # noqa: E402

__all__ = ["ProfilingConfig"]
