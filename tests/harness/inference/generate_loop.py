"""Offline generation: every rank calls ``StaticInferenceEngine.generate`` once per request, in a
loop, as a batch-inference script does (no server, no threads).

Environment: ``HARNESS_REQUESTS`` (default 4) requests of one prompt each;
``HARNESS_BEFORE_REQUEST=K:COMMAND``: before request K, rank 0 runs COMMAND (a shell command,
e.g. ``mindspeed-prof trigger FILE --steps 2``) and every rank waits for it at a barrier.
"""

import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_shim  # noqa: E402

from megatron.core.inference.sampling_params import SamplingParams  # noqa: E402
from megatron.training import get_model  # noqa: E402
from megatron.training.initialize import initialize_megatron  # noqa: E402

from engine import (  # noqa: E402
    ARGS_DEFAULTS,
    add_text_generate_args,
    get_inference_engine,
    model_provider,
)

server_shim.install()


def before_request():
    spec = os.environ.get("HARNESS_BEFORE_REQUEST")
    if not spec:
        return None, None
    at, command = spec.split(":", 1)
    return int(at), command


@torch.inference_mode()
def main():
    initialize_megatron(extra_args_provider=add_text_generate_args, args_defaults=ARGS_DEFAULTS)
    from megatron.training import get_args

    model = get_model(model_provider, wrap_with_ddp=False)[0]
    model.eval()
    engine = get_inference_engine(get_args(), model)
    at, command = before_request()
    for n in range(1, int(os.environ.get("HARNESS_REQUESTS", "4")) + 1):
        if n == at:
            if torch.distributed.get_rank() == 0:
                subprocess.run(command, shell=True, check=True)
            torch.distributed.barrier()
        engine.generate(prompts=["1 2 3"], sampling_params=SamplingParams(num_tokens_to_generate=4))


if __name__ == "__main__":
    main()
