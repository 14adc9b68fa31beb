"""A plain megatron-core dynamic-engine script (no ``megatron.training``), run under torchrun.

Every rank is one TP rank of one model (TP = WORLD_SIZE, gloo). The script sets up the parallel
state itself, builds ``harness.dynamic.tiny_gpt``'s engine and serves the requests given by
``--request AT:PROMPT_LEN:TOKENS`` (added once the engine has taken AT steps) through one of the
loops users write:

* ``--loop step``: the manual loop of Megatron's ``gpt_dynamic_inference.py``
  (``add_request`` between ``step_modern()`` calls); requests may join mid-run (mixed steps);
* ``--loop generate``: ``engine.generate(prompts)`` (all requests at step 0);
* ``--loop llm``: the high-level API, ``MegatronLLM(use_coordinator=True)``: the engine loop on
  the API's background thread behind a spawned coordinator, rank 0 submits;
* ``--loop step-in-loop``: the manual loop run inside a coroutine (``asyncio.run``), where
  ``step_modern()`` finds a running event loop and runs each step on a new thread.

Each rank writes ``{HARNESS_REPORT_DIR}/dynamic_rank{R}.json`` (``harness.dynamic.steps``), with
each request's generated tokens and what a no-KV-cache forward of the same model predicts.
Nothing runs at import: the coordinator (spawned) re-imports this file as ``__mp_main__``.
"""

import argparse
import faulthandler
import os
import sys
import time


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", choices=("step", "generate", "llm", "step-in-loop"),
                        default="step")
    parser.add_argument("--request", action="append", default=[], metavar="AT:PROMPT_LEN:TOKENS",
                        help="add a request once the engine has taken AT steps")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--chunked-prefill", action="store_true")
    parser.add_argument("--logging-step-interval", type=int, default=0)
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the no-KV-cache reference forward")
    # Options it does not know are left to whoever reads them (mindspeed_prof's --profile*
    # flags, read from this command line when the engine is built), as many scripts do.
    args, _ = parser.parse_known_args(argv)
    args.requests = []
    for index, text in enumerate(args.request or ["0:5:4"]):
        at, length, tokens = (int(part) for part in text.split(":"))
        args.requests.append({"id": index, "at": at, "prompt": prompt_tokens(index, length),
                              "tokens": tokens})
    if args.loop in ("generate", "llm") and len({r["tokens"] for r in args.requests}) > 1:
        parser.error(f"--loop {args.loop} takes one sampling setting: give every --request the "
                     "same TOKENS")
    return args


def prompt_tokens(index, length):
    """A deterministic prompt per request id (ids 1..119; 127 is end-of-document)."""
    return [(7 * index + 3 * position) % 119 + 1 for position in range(length)]


def _run_steps(engine, requests, greedy):
    pending = sorted(requests, key=lambda r: r["at"])
    while pending or engine.has_unfinished_requests():
        # An idle engine takes the next request at once rather than stepping on nothing.
        while pending and (pending[0]["at"] <= engine.context.step_count
                           or not engine.has_unfinished_requests()):
            request = pending.pop(0)
            engine.add_request(request["id"], request["prompt"], greedy(request["tokens"]))
        engine.step_modern()


def _run_llm(inference_config, model, requests, greedy, log):
    from megatron.core.inference.apis import MegatronLLM

    from harness.dynamic import tiny_gpt

    llm = MegatronLLM(model=model, tokenizer=tiny_gpt.IdTokenizer(),
                      inference_config=inference_config, use_coordinator=True,
                      coordinator_host="127.0.0.1")
    log.attach(llm.engine)  # before any request: the loop looks async_step up every step
    coordinator = getattr(llm.engine, "inference_coordinator_process", None)
    log.set(api_thread=llm._loop_manager._thread.native_id,
            coordinator_pid=coordinator.pid if coordinator is not None else None)
    if llm.is_primary_rank:
        answers = llm.generate([r["prompt"] for r in requests], greedy(requests[0]["tokens"]))
        log.set(answers=[[int(t) for t in answer.generated_tokens] for answer in answers])
        llm.shutdown()
    else:
        llm.wait_for_shutdown()


def main(argv=None):
    started = time.time()
    # A job that hangs (one did once in CI, after writing its traces) prints every thread's stack
    # on stderr before the test's timeout kills it; a run that ends in time prints nothing.
    faulthandler.dump_traceback_later(float(os.environ.get("HARNESS_STACKS_AFTER_S", "200")),
                                      exit=False)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    args = _parse(argv)
    from harness.dynamic import cuda_extras

    cuda_extras.install()
    import torch

    from harness.dynamic import steps, tiny_gpt

    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    tiny_gpt.init_parallel(tp=world)
    model = tiny_gpt.build_model(tp=world)
    reference = None if args.no_reference else (
        lambda prompt, generated: tiny_gpt.reference_tokens(model, prompt, generated))
    log = steps.StepLog.from_env(rank, reference, loop=args.loop, tp=world)
    cuda_extras.CUDART.listeners.append(log.profiler_call)
    # --loop llm: the engine's consensus every loop iteration, not every 20th (FACTS.md §6: TP
    # ranks whose loops count iterations differently, after upstream's ZMQ broadcast dropped
    # rank 1's first messages, end their dummy forwards at different iterations and hang)
    shape = tiny_gpt.EngineShape(max_tokens=args.max_tokens,
                                 enable_chunked_prefill=args.chunked_prefill,
                                 logging_step_interval=args.logging_step_interval,
                                 ep_consensus_interval=1 if args.loop == "llm" else None)
    log.set(import_and_build_s=round(time.time() - started, 2))
    if args.loop == "llm":
        # Not under inference_mode: that is thread-local, and the engine loop runs on the API's
        # thread, where in-place updates of inference tensors built here would fail.
        _run_llm(tiny_gpt.inference_config(shape), model, args.requests, tiny_gpt.greedy, log)
    else:
        # Not under inference_mode for steps on other threads (the mode is thread-local).
        with torch.inference_mode(args.loop != "step-in-loop"):
            engine = tiny_gpt.build_engine(model, shape)
            log.attach(engine)
            if args.loop == "step":
                _run_steps(engine, args.requests, tiny_gpt.greedy)
            elif args.loop == "step-in-loop":
                async def steps_inside_a_running_loop():
                    _run_steps(engine, args.requests, tiny_gpt.greedy)

                import asyncio
                asyncio.run(steps_inside_a_running_loop())
            else:
                answers = engine.generate([r["prompt"] for r in args.requests],
                                          tiny_gpt.greedy(args.requests[0]["tokens"]))
                log.set(answers=[[int(t) for t in a.merge().generated_tokens] for a in answers])
    log.set(total_s=round(time.time() - started, 2), end="returned")
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
