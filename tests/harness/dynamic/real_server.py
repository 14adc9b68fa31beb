"""Opt-in tier: a Megatron-LM checkout's own ``tools/run_dynamic_text_generation_server.py``.

``MEGATRON_LM_PATH`` points at the checkout (0.19: ``git worktree add DIR core_v0.19.0``; 0.17.1,
0.18.2 the same with their tags, beside the matching megatron-core). Put the
folder made by ``harness.real_megatron.overlay.build`` first on ``PYTHONPATH`` (the checkout's
``megatron/training``, ``megatron/inference`` ... over the installed megatron-core wheel: the
checkout has no built ``megatron/core/datasets/helpers_cpp*.so``), then, under torchrun:

* ``real_server.py checkpoint ARGS --save DIR``: ``initialize_megatron`` with the tool's
  arguments, the model the tool would build (``megatron.inference.utils.get_model_builder``), and
  Megatron's own ``save_checkpoint`` (random weights; ``--ckpt-format torch``): the tool insists
  on ``--load``;
* ``real_server.py serve ARGS --load DIR``: the tool itself, run as ``__main__``.

Both apply the real tier's CPU fixes (``harness.real_megatron.run_pretrain_gpt.apply_cpu_fixes``:
cpu_shim, a pretended CUDA device for ``initialize_megatron``, no C++/fused-kernel builds) and
this folder's ``cuda_extras``. ``serve`` also keeps ``dynamic_rank{R}.json`` (``steps.StepLog`` on
the engine ``get_dynamic_inference_engine`` returns, each finished request's reference tokens;
rank 0 adds ``port``, ``frontend_pids``, ``coordinator_pid``) so the tests read the real tool as
they read ``serve_dynamic.py``. Nothing runs at import (the coordinator re-imports this file).
"""

import os
import runpy
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(os.path.dirname(HERE))

# The tiny GPT of harness.dynamic.tiny_gpt as Megatron-LM flags (TP comes from the caller).
MODEL_ARGS = (
    "--num-layers", "2", "--hidden-size", "64", "--ffn-hidden-size", "128",
    "--num-attention-heads", "4", "--group-query-attention", "--num-query-groups", "2",
    "--seq-length", "512", "--max-position-embeddings", "512",
    "--position-embedding-type", "rope", "--tokenizer-type", "NullTokenizer",
    "--vocab-size", "127", "--transformer-impl", "local", "--use-cpu-initialization",
    "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion",
    "--no-bias-gelu-fusion", "--no-bias-dropout-fusion", "--no-rope-fusion",
    "--no-persist-layer-norm",
    "--attention-dropout", "0.0", "--hidden-dropout", "0.0", "--micro-batch-size", "1",
    "--init-method-std", "0.5",
    "--distributed-backend", "gloo", "--ckpt-format", "torch", "--seed", "1234",
)
# The CPU engine configuration (CUDA graphs are off unless asked for).
ENGINE_ARGS = (
    "--inference-dynamic-batching-buffer-size-gb", "0.01",
    "--inference-dynamic-batching-block-size", "16",
    "--inference-dynamic-batching-max-requests", "8",
    "--inference-dynamic-batching-max-tokens", "256",
)


def _fixes():
    sys.path.insert(0, TESTS)
    from harness.real_megatron import run_pretrain_gpt

    run_pretrain_gpt.apply_cpu_fixes()
    from harness.dynamic import cuda_extras

    cuda_extras.install()


def checkpoint():
    """Save a random-weight checkpoint of the model the tool builds, with Megatron's code (0.19:
    ``get_model_builder``; 0.17/0.18: ``get_model_for_inference``, and 0.17 parses its
    arguments inside ``initialize_megatron``)."""
    from megatron.inference import utils
    from megatron.training import arguments, get_args
    from megatron.training.checkpointing import save_checkpoint
    from megatron.training.initialize import initialize_megatron

    if hasattr(arguments, "parse_and_validate_args"):
        arguments.parse_and_validate_args(extra_args_provider=utils.add_inference_args)
        initialize_megatron()
    else:
        initialize_megatron(extra_args_provider=utils.add_inference_args)
    if hasattr(utils, "get_model_builder"):
        from megatron.core.process_groups_config import ProcessGroupCollection

        model = utils.get_model_builder(get_args()).build_distributed_models(
            pg_collection=ProcessGroupCollection.use_mpu_process_groups(), wrap_with_ddp=False)
    else:  # get_model_for_inference's build, without its load (there is nothing to load yet)
        import functools

        model = utils._get_model(functools.partial(utils.model_provider, utils.gpt_builder),
                                 wrap_with_ddp=False)
    save_checkpoint(1, model, None, None, 0)


def _watch_listening(log, engine):
    """Record the coordinator once the engine listens; ranks but 0 then serve."""
    listen = engine.start_listening_to_data_parallel_coordinator

    async def start_listening(*args, **kwargs):
        address = await listen(*args, **kwargs)
        coordinator = getattr(engine, "inference_coordinator_process", None)
        # Rank 0 serves once its front ends run (_watch_front_ends).
        log.set(serving=log.data["rank"] != 0, coordinator_addr=address,
                coordinator_pid=coordinator.pid if coordinator is not None else None)
        return address

    engine.start_listening_to_data_parallel_coordinator = start_listening


def _watch_front_ends(logs):
    """Before the tool imports it by name: record the port and the forked front ends."""
    from megatron.core.inference.text_generation_server import dynamic_text_gen_server as package
    from megatron.core.inference.text_generation_server.dynamic_text_gen_server import (
        text_generation_server as server_module,
    )

    start = package.start_text_gen_server

    def start_text_gen_server(*args, **kwargs):
        start(*args, **kwargs)
        logs[0].set(port=server_module._SHARED_SOCKET.getsockname()[1], serving=True,
                    frontend_pids=[p.pid for p in server_module._SERVER_PROCESSES])

    package.start_text_gen_server = start_text_gen_server


def serve():
    """The tool as ``__main__``, its engine watched by a ``StepLog``."""
    import megatron.inference.utils as inference_utils

    from harness.dynamic import cuda_extras, steps, tiny_gpt

    rank = int(os.environ.get("RANK", "0"))
    build = inference_utils.get_dynamic_inference_engine
    logs = []

    def get_dynamic_inference_engine(*args, **kwargs):
        engine = build(*args, **kwargs)
        model = engine.controller.inference_wrapped_model.model
        log = steps.StepLog.from_env(
            rank, lambda prompt, generated: tiny_gpt.reference_tokens(model, prompt, generated),
            loop="real tool")
        log.attach(engine)
        cuda_extras.CUDART.listeners.append(log.profiler_call)
        _watch_listening(log, engine)
        logs.append(log)
        return engine

    inference_utils.get_dynamic_inference_engine = get_dynamic_inference_engine
    _watch_front_ends(logs)
    tool = os.path.join(os.environ["MEGATRON_LM_PATH"], "tools",
                        "run_dynamic_text_generation_server.py")
    sys.argv[0] = tool
    started, end = time.time(), "returned"  # the tool catches KeyboardInterrupt itself
    try:
        runpy.run_path(tool, run_name="__main__")
    except BaseException as error:
        end = type(error).__name__
        raise
    finally:
        for log in logs:
            log.set(end=end, total_s=round(time.time() - started, 2))


if __name__ == "__main__":
    command = sys.argv.pop(1)
    _fixes()
    {"checkpoint": checkpoint, "serve": serve}[command]()
