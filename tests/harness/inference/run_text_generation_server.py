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

import json
import os
import sys
import threading

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_shim  # noqa: E402  (before megatron-core's inference modules build anything)

from megatron.core import mpu  # noqa: E402
from megatron.core.inference.contexts import StaticInferenceContext  # noqa: E402
from megatron.core.inference.engines import StaticInferenceEngine  # noqa: E402
from megatron.core.inference.model_inference_wrappers.gpt.gpt_inference_wrapper import (  # noqa: E402
    GPTInferenceWrapper,
)
from megatron.core.inference.model_inference_wrappers.inference_wrapper_config import (  # noqa: E402
    InferenceWrapperConfig,
)
from megatron.core.inference.text_generation_controllers.text_generation_controller import (  # noqa: E402
    TextGenerationController,
)
from megatron.core.inference.text_generation_server import MegatronServer  # noqa: E402
from megatron.core.inference.text_generation_server import (  # noqa: E402
    text_generation_server as server_module,
)
from megatron.core.inference.text_generation_server.run_mcore_engine import (  # noqa: E402
    run_mcore_engine,
)
from megatron.core.models.gpt import GPTModel  # noqa: E402
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec  # noqa: E402
from megatron.training import get_args, get_model, print_rank_0  # noqa: E402
from megatron.training.arguments import core_transformer_config_from_args  # noqa: E402
from megatron.training.initialize import initialize_megatron  # noqa: E402

server_shim.install()


class IdTokenizer:
    """Prompts are space-separated token ids; the last id of the vocabulary ends a document."""

    def __init__(self, vocab_size):
        self.vocab_size = vocab_size
        self.eod = vocab_size - 1

    def tokenize(self, text):
        return [int(token) for token in text.split()]

    def detokenize(self, ids):
        return " ".join(str(int(token)) for token in ids)

    def offsets(self, ids, text):
        positions, start = [], 0
        for token in ids:
            positions.append(start)
            start += len(str(int(token))) + 1
        return positions


def model_provider(pre_process=True, post_process=True, vp_stage=None):
    args = get_args()
    return GPTModel(
        config=core_transformer_config_from_args(args),
        transformer_layer_spec=get_gpt_layer_local_spec(),
        vocab_size=args.padded_vocab_size,
        max_sequence_length=args.max_position_embeddings,
        pre_process=pre_process,
        post_process=post_process,
    )


def get_inference_engine(args, model):
    config = InferenceWrapperConfig(
        hidden_size=args.hidden_size,
        inference_batch_times_seqlen_threshold=args.inference_batch_times_seqlen_threshold,
        fp32_residual_connection=False,
        params_dtype=args.params_dtype,
        padded_vocab_size=args.padded_vocab_size,
        inference_max_seq_length=args.inference_max_seq_length,
        inference_max_requests=args.inference_max_batch_size,
    )
    wrapped = GPTInferenceWrapper(model, config, StaticInferenceContext.from_config(config))
    controller = TextGenerationController(inference_wrapped_model=wrapped,
                                          tokenizer=IdTokenizer(args.vocab_size))
    return StaticInferenceEngine(text_generation_controller=controller,
                                 max_batch_size=args.inference_max_batch_size)


def add_text_generate_args(parser):
    group = parser.add_argument_group(title="text generation")
    group.add_argument("--port", type=int, default=5000)
    group.add_argument("--inference-max-batch-size", type=int, default=8)
    group.add_argument("--inference-max-seq-length", type=int, default=256)
    group.add_argument("--inference-batch-times-seqlen-threshold", type=int, default=-1)
    return parser


class ServerReport:
    """``{HARNESS_REPORT_DIR}/server_rank{R}.json``: pid, main thread and, per request this rank
    served, the native id of the thread that ran it (rewritten after every request)."""

    def __init__(self, rank):
        folder = os.environ.get("HARNESS_REPORT_DIR")
        self.path = os.path.join(folder, f"server_rank{rank}.json") if folder else None
        self.data = {"rank": rank, "pid": os.getpid(),
                     "main_thread": threading.main_thread().native_id, "request_threads": []}
        self.write()

    def write(self):
        if self.path is None:
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path + ".tmp", "w") as handle:
            json.dump(self.data, handle)
        os.replace(self.path + ".tmp", self.path)

    def spy_on(self, module):
        """Record the thread of every request ``module.run_mcore_engine`` serves."""
        serve = module.run_mcore_engine

        def run_mcore_engine_and_record(*args, **kwargs):
            self.data["request_threads"].append(threading.get_native_id())
            self.write()
            return serve(*args, **kwargs)

        module.run_mcore_engine = run_mcore_engine_and_record


@torch.inference_mode()
def main():
    initialize_megatron(
        extra_args_provider=add_text_generate_args,
        # The stand-in validates as for training; a server needs neither.
        args_defaults={"train_iters": 1, "lr": 0.0, "micro_batch_size": 1},
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


if __name__ == "__main__":
    main()
