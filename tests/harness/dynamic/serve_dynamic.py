"""Megatron's dynamic text-generation server, built from the megatron-core wheel's own pieces.

What Megatron-LM's ``tools/run_dynamic_text_generation_server.py`` (0.19) does, without
``megatron.training`` (no Megatron-LM checkout on the CI leg): every rank (TP = WORLD_SIZE, gloo)
builds ``harness.dynamic.tiny_gpt``'s engine under ``torch.inference_mode()`` and awaits
``engine.start_listening_to_data_parallel_coordinator(launch_inference_coordinator=True)`` (global
rank 0 spawns the data-parallel coordinator); rank 0 then forks the Quart/hypercorn front ends
with ``start_text_gen_server`` (completions, chat completions, health, and 0.19's
``/start_profile`` ``/stop_profile``), and every rank awaits the engine loop
(``run_engine_with_coordinator``). ``--port 0`` binds a free port on ``--host`` here and hands the
bound socket to ``start_text_gen_server`` (0.19; 0.17 and 0.18 take no socket: a port free
now is passed instead); the port lands in the report.

Stop it as the tool is stopped: SIGINT (Ctrl-C) to torchrun's process group; torchrun relays it
to each rank's own process group (each rank is a session leader; rank 0's group holds the
coordinator and the front ends). Each rank writes ``{HARNESS_REPORT_DIR}/dynamic_rank{R}.json``
(``harness.dynamic.steps``, with each finished request's no-KV-cache reference tokens; rank 0
adds ``port``, ``frontend_pids``, ``coordinator_pid``; every rank ``serving`` once its loop
runs, and ``end`` when it leaves).
Nothing runs at import: the coordinator (spawned) re-imports this file as ``__mp_main__``.
"""

import argparse
import asyncio
import inspect
import os
import socket
import sys
import time


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port, chosen here")
    parser.add_argument("--frontends", type=int, default=2,
                        help="front-end processes (the tool uses start_text_gen_server's 4)")
    parser.add_argument("--logging-step-interval", type=int, default=0)
    parser.add_argument("--api", choices=("tool", "async-llm"), default="tool",
                        help="wire the pieces as the tool does, or serve with MegatronAsyncLLM")
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the no-KV-cache reference forward of each finished request")
    parser.add_argument("--tp", type=int, default=None,
                        help="tensor-parallel size (default WORLD_SIZE; less: data-parallel "
                             "replicas of the model)")
    args, _ = parser.parse_known_args(argv)  # --profile* flags are mindspeed_prof's to read
    return args


def _listening_socket(host, port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


async def _serve(engine, args, rank, log):
    from megatron.core.inference.text_generation_server.dynamic_text_gen_server import (
        start_text_gen_server,
        stop_text_gen_server,
        text_generation_server,
    )

    coordinator_addr = await engine.start_listening_to_data_parallel_coordinator(
        launch_inference_coordinator=True, hostname=args.host)
    try:
        if rank == 0:
            port, bound = args.port, {}
            if "sock" in inspect.signature(start_text_gen_server).parameters:
                bound["sock"] = sock = _listening_socket(args.host, args.port)  # 0.19
                port = sock.getsockname()[1]
            elif port == 0:  # 0.17/0.18 bind the port themselves: take one free now
                with _listening_socket(args.host, 0) as probe:
                    port = probe.getsockname()[1]
            start_text_gen_server(coordinator_addr=coordinator_addr,
                                  tokenizer=engine.controller.tokenizer, rank=rank,
                                  server_port=port, parsers=[], verbose=False,
                                  num_replicas=args.frontends, hostname=args.host, **bound)
            log.set(port=port, coordinator_addr=coordinator_addr,
                    coordinator_pid=engine.inference_coordinator_process.pid,
                    frontend_pids=[p.pid for p in text_generation_server._SERVER_PROCESSES])
        log.set(serving=True)
        await engine.engine_loop_task
    finally:
        if rank == 0:
            stop_text_gen_server()


async def _serve_high_level(model, shape, args, rank, log):
    """The same server through ``MegatronAsyncLLM.serve`` (``examples/inference/
    launch_inference_server.py``): the engine loop runs on the API's background thread."""
    from megatron.core.inference.apis import MegatronAsyncLLM, ServeConfig
    from megatron.core.inference.text_generation_server.dynamic_text_gen_server import (
        text_generation_server,
    )

    from harness.dynamic import tiny_gpt

    port = args.port
    if port == 0:  # serve() binds the port itself: take one free now
        with _listening_socket(args.host, 0) as probe:
            port = probe.getsockname()[1]
    async with MegatronAsyncLLM(model=model, tokenizer=tiny_gpt.IdTokenizer(),
                                inference_config=tiny_gpt.inference_config(shape),
                                coordinator_host=args.host) as llm:
        log.attach(llm.engine)  # no request yet: the loop looks async_step up every step
        log.set(api_thread=llm._loop_manager._thread.native_id)
        await llm.serve(ServeConfig(host=args.host, port=port, frontend_replicas=args.frontends),
                        blocking=False)
        if rank == 0:
            log.set(port=port, coordinator_pid=llm.engine.inference_coordinator_process.pid,
                    frontend_pids=[p.pid for p in text_generation_server._SERVER_PROCESSES])
        log.set(serving=True)
        await llm.wait_for_shutdown()


def main(argv=None):
    started = time.time()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    args = _parse(argv)
    from harness.dynamic import cuda_extras

    cuda_extras.install()
    import torch

    from harness.dynamic import steps, tiny_gpt

    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    end = "returned"
    # The tool builds and serves under inference_mode; the high-level API must not (the mode is
    # thread-local and its engine loop runs on another thread).
    tp = args.tp or world
    with torch.inference_mode(args.api == "tool"):
        tiny_gpt.init_parallel(tp=tp)
        model = tiny_gpt.build_model(tp=tp)
        reference = None if args.no_reference else (
            lambda prompt, generated: tiny_gpt.reference_tokens(model, prompt, generated))
        log = steps.StepLog.from_env(rank, reference, loop=f"server ({args.api})", tp=tp)
        cuda_extras.CUDART.listeners.append(log.profiler_call)
        shape = tiny_gpt.EngineShape(logging_step_interval=args.logging_step_interval)
        if args.api == "tool":
            engine = tiny_gpt.build_engine(model, shape)
            log.attach(engine)
            serving = _serve(engine, args, rank, log)
        else:
            serving = _serve_high_level(model, shape, args, rank, log)
        log.set(import_and_build_s=round(time.time() - started, 2))
        try:
            asyncio.run(serving)
        except KeyboardInterrupt:
            end = "KeyboardInterrupt"
        finally:
            log.set(end=end, total_s=round(time.time() - started, 2))
            if torch.distributed.is_initialized():
                torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
