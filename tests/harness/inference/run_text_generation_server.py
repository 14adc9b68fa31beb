"""A Megatron text-generation server on the CPU, wired as Megatron-LM's
``tools/run_text_generation_server.py`` ``main()`` wires it (0.15-0.16): ``initialize_megatron``
with the text-generation flags, ``get_model`` without DDP, a ``StaticInferenceEngine`` over a
``GPTInferenceWrapper``, ``MegatronServer`` on the first tensor-parallel rank (Flask, one thread
per request) and, on every other rank, the loop that waits for rank 0's broadcast and runs
``run_mcore_engine``. Stopping rank 0 with SIGINT ends the server; rank 0 then broadcasts 1 and
every rank leaves its loop, as upstream.

The model is the harness's tiny megatron-core GPT with random weights (no checkpoint) and the
tokenizer reads prompts as space-separated token ids ("3 1 4 1").
"""

import os
import sys
import threading

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_shim  # noqa: E402  (before megatron-core's inference modules build anything)

from megatron.core import mpu  # noqa: E402
from megatron.core.inference.text_generation_server import MegatronServer  # noqa: E402
from megatron.core.inference.text_generation_server import (  # noqa: E402
    text_generation_server as server_module,
)
from megatron.core.inference.text_generation_server.run_mcore_engine import (  # noqa: E402
    run_mcore_engine,
)
from megatron.training import get_args, get_model, print_rank_0  # noqa: E402
from megatron.training.initialize import initialize_megatron  # noqa: E402

from server_report import ServerReport  # noqa: E402
from engine import (  # noqa: E402
    ARGS_DEFAULTS,
    add_text_generate_args,
    get_inference_engine,
    model_provider,
)

server_shim.install()


@torch.inference_mode()
def main():
    initialize_megatron(
        extra_args_provider=add_text_generate_args,
        args_defaults=ARGS_DEFAULTS,
    )
    args = get_args()
    model = get_model(model_provider, wrap_with_ddp=False)[0]
    model.eval()
    engine = get_inference_engine(args, model)
    report = ServerReport(torch.distributed.get_rank())
    if torch.distributed.get_rank() == 0:
        report.spy_on(server_module)  # rank 0 serves on Flask's threads

    if mpu.is_pipeline_first_stage() and mpu.get_tensor_model_parallel_rank() == 0:
        print_rank_0(f"serving on 127.0.0.1:{args.port}")
        MegatronServer(engine, args).run("127.0.0.1", port=args.port)

    while True:
        choice = torch.tensor(1, dtype=torch.long, device="cuda")
        torch.distributed.broadcast(choice, 0)
        if choice.item() == 0:
            try:
                report.data["request_threads"].append(threading.get_native_id())
                report.write()
                run_mcore_engine(engine)
            except ValueError:
                pass
        elif choice.item() == 1:
            break
    # Not in upstream's script: without it, torch may abort the process at interpreter exit
    # (gloo's worker threads outlive the interpreter: "terminate called without an active
    # exception", SIGABRT; pytorch/pytorch#190489), which failed a test that ended every request
    # (CI, stop 40: rank 1 exit -6 after the server stopped). Nothing the tests look at runs after.
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
