"""A stand-in for MindSpeed-LLM as seen from outside, written from its code (master): importing
the package runs its adaptor (``tasks/megatron_adaptor_v2``), which removes every MindSpeed patch,
replaces MindSpeed's feature list with its own, and applies that list; one of its features
replaces Megatron's ``train`` with MindSpeed-LLM's, which starts its own loop profiler when
``args.profile`` is on. Only the parts mindspeed_prof touches are modelled."""

from mindspeed_llm.tasks import megatron_adaptor_v2 as megatron_adaptor  # noqa: F401
