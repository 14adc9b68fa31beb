"""The job's parallel layout, read from Megatron once profiling starts.

``distributed_args`` is what torch_npu stores in ``profiler_metadata.json`` (MindSpeed-LLM writes
the same keys) so msprof-analyze and MindStudio Insight fill their TP/PP/DP columns.
``rank_layout`` gives every rank's coordinates for the ``--profile-ranks`` selectors; it costs one
all_gather at start-up, done only when a selector is used.
"""

import os


def _size(getter_name, fallback):
    try:
        from megatron.core import parallel_state as ps
        if ps.model_parallel_is_initialized():
            return getattr(ps, getter_name)()
    except Exception:  # noqa: BLE001 - older/newer megatron-core: use args
        pass
    return fallback


def distributed_args(args, rank, world_size):
    tp = int(getattr(args, "tensor_model_parallel_size", 1) or 1)
    pp = int(getattr(args, "pipeline_model_parallel_size", 1) or 1)
    cp = int(getattr(args, "context_parallel_size", 1) or 1)
    ep = int(getattr(args, "expert_model_parallel_size", 1) or 1)
    dp = _size("get_data_parallel_world_size",
               getattr(args, "data_parallel_size", None) or max(1, world_size // (tp * pp * cp)))
    return {
        "tensor_model_parallel_size": tp,
        "pipeline_model_parallel_size": pp,
        "data_parallel_size": int(dp),
        "context_parallel_size": cp,
        "expert_model_parallel_size": ep,
        "sequence_parallel": bool(getattr(args, "sequence_parallel", False)),
        # how ranks map to coordinates (Megatron's initialize: --use-tp-pp-dp-mapping)
        "order": "tp-pp-dp" if getattr(args, "use_tp_pp_dp_mapping", False)
        else "tp-cp-ep-dp-pp",
        "rank": rank,
        "world_size": world_size,
    }


def pipeline_args(args):
    """The pipeline's shape as the manifest records it: virtual stages per stage, microbatches
    per step and the schedule family Megatron's ``get_forward_backward_func`` picks from them
    (``config/schedule_marks.SCHEDULES``)."""
    from mindspeed_prof.config import schedule_marks

    pp = int(getattr(args, "pipeline_model_parallel_size", 1) or 1)
    vpp = int(getattr(args, "virtual_pipeline_model_parallel_size", None) or 1)
    if pp == 1:
        schedule = schedule_marks.NO_PIPELINING
    else:
        schedule = schedule_marks.INTERLEAVED if vpp > 1 else schedule_marks.ONE_F_ONE_B
    return {"virtual_pipeline_model_parallel_size": vpp,
            "num_microbatches": _num_microbatches(args),
            "pipeline_schedule": schedule}


def _num_microbatches(args):
    try:
        from megatron.core.num_microbatches_calculator import get_num_microbatches
        return int(get_num_microbatches())
    except Exception:  # noqa: BLE001 - older layouts or not set up yet: from the batch sizes
        pass
    try:
        from megatron.core import parallel_state
        dp = parallel_state.get_data_parallel_world_size()
        return int(args.global_batch_size) // (int(args.micro_batch_size) * int(dp))
    except Exception:  # noqa: BLE001
        return None


def rank_and_world(args):
    """This rank and the world size: from torch.distributed once it is up, else from ``args``.

    ``args`` may be None (an inference engine driven without Megatron's training package):
    then rank 0 of 1.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(getattr(args, "rank", 0) or 0), int(getattr(args, "world_size", 1) or 1)


def own_coordinates():
    from megatron.core import parallel_state as ps

    def get(name):
        try:
            return int(getattr(ps, name)())
        except Exception:  # noqa: BLE001 - getter missing or group not built: coordinate 0
            return 0

    return {
        "tp": get("get_tensor_model_parallel_rank"),
        "pp": get("get_pipeline_model_parallel_rank"),
        "dp": get("get_data_parallel_rank"),
        "cp": get("get_context_parallel_rank"),
        "ep": get("get_expert_model_parallel_rank"),
        # torchrun's GROUP_RANK is the node (agent) index.
        "node": int(os.environ.get("GROUP_RANK", 0)),
    }


def rank_layout(world_size):
    import torch.distributed as dist

    mine = own_coordinates()
    if not (dist.is_available() and dist.is_initialized()):
        return {0: mine}
    gathered = [None] * world_size
    dist.all_gather_object(gathered, mine)
    return dict(enumerate(gathered))
