"""A tiny megatron-core GPT behind the dynamic inference engine, with no ``megatron.training``.

The pieces Megatron-LM's ``megatron.inference.utils.get_dynamic_inference_engine`` wires
(``DynamicInferenceContext`` -> ``GPTInferenceWrapper`` -> ``TextGenerationController`` ->
``DynamicInferenceEngine``), built straight from megatron-core, with the parallel state set up
here: a plain megatron-core script, as users write one. Random weights from a fixed seed; prompts
are space-separated token ids ("3 1 4"). Call ``cuda_extras.install()`` first.
"""

import dataclasses
import os

import torch

VOCAB_SIZE = 128
MAX_SEQUENCE_LENGTH = 512


class IdTokenizer:
    """Prompts are space-separated token ids; the last id of the vocabulary ends a document.

    Defined in an importable module: the coordinator (spawned) and the front ends (forked)
    receive it pickled."""

    def __init__(self, vocab_size=VOCAB_SIZE):
        self.vocab_size = vocab_size
        self.eod = vocab_size - 1
        self.bos = None  # no beginning-of-document token, as Megatron's NullTokenizer

    def tokenize(self, text):
        return [int(token) for token in text.split()]

    def detokenize(self, ids, **kwargs):
        return " ".join(str(int(token)) for token in ids)

    def offsets(self, ids, text):
        positions, start = [], 0
        for token in ids:
            positions.append(start)
            start += len(str(int(token))) + 1
        return positions


@dataclasses.dataclass(frozen=True)
class EngineShape:
    """The issue's CPU configuration: a 10 MB paged cache of 16-token blocks, 8 requests, 256
    tokens per step (64 is the floor), no CUDA graphs."""

    block_size_tokens: int = 16
    buffer_size_gb: float = 0.01
    max_requests: int = 8
    max_tokens: int = 256
    enable_chunked_prefill: bool = False
    logging_step_interval: int = 0
    # None: megatron-core's default (20 on 0.19); where the config has the field
    ep_consensus_interval: "int | None" = None


def init_parallel(tp):
    """gloo process group from torchrun's environment, then megatron-core's parallel state."""
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(
            "gloo", rank=int(os.environ.get("RANK", "0")),
            world_size=int(os.environ.get("WORLD_SIZE", "1")))
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    model_parallel_cuda_manual_seed(1234)


def build_model(tp, seed=1234):
    """A 2-layer GPT, 4 query heads over 2 key/value groups (GQA), float32, eval mode."""
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    torch.manual_seed(seed)
    config = TransformerConfig(
        num_layers=2, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4,
        num_query_groups=2, tensor_model_parallel_size=tp, use_cpu_initialization=True,
        params_dtype=torch.float32, hidden_dropout=0.0, attention_dropout=0.0)
    model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(),
                     vocab_size=VOCAB_SIZE, max_sequence_length=MAX_SEQUENCE_LENGTH,
                     position_embedding_type="rope")
    return model.eval()


def inference_config(shape=EngineShape()):
    """megatron-core's ``InferenceConfig`` for ``shape``."""
    import dataclasses

    from megatron.core.inference.config import InferenceConfig

    extra = {}
    if shape.ep_consensus_interval is not None and "ep_consensus_interval" in {
            f.name for f in dataclasses.fields(InferenceConfig)}:
        extra["ep_consensus_interval"] = shape.ep_consensus_interval
    return InferenceConfig(
        block_size_tokens=shape.block_size_tokens, buffer_size_gb=shape.buffer_size_gb,
        max_requests=shape.max_requests, max_tokens=shape.max_tokens,
        max_sequence_length=MAX_SEQUENCE_LENGTH, num_cuda_graphs=None,
        enable_chunked_prefill=shape.enable_chunked_prefill,
        logging_step_interval=shape.logging_step_interval, **extra)


def build_engine(model, shape=EngineShape()):
    """The dynamic engine over ``model``, as ``get_dynamic_inference_engine`` builds it."""
    from megatron.core.inference.contexts.dynamic_context import DynamicInferenceContext
    from megatron.core.inference.engines import DynamicInferenceEngine
    from megatron.core.inference.model_inference_wrappers.gpt.gpt_inference_wrapper import (
        GPTInferenceWrapper,
    )
    from megatron.core.inference.text_generation_controllers.text_generation_controller import (
        TextGenerationController,
    )

    context = DynamicInferenceContext(model.config, inference_config(shape))
    controller = TextGenerationController(GPTInferenceWrapper(model, context), IdTokenizer())
    return DynamicInferenceEngine(controller, context)


def greedy(num_tokens):
    """Greedy sampling (top-k 1) of ``num_tokens`` tokens, no stop at end of document."""
    from megatron.core.inference.sampling_params import SamplingParams

    return SamplingParams(top_k=1, num_tokens_to_generate=num_tokens, termination_id=-1,
                          return_log_probs=False)


@torch.inference_mode()
def reference_tokens(model, prompt, generated):
    """What a plain forward (no KV cache, local attention) predicts for each generated token,
    given the prompt and the tokens before it (teacher forcing): one forward over the whole
    sequence; on every TP rank (the forward is a collective)."""
    tokens = torch.tensor([list(prompt) + list(generated)[:-1]])
    positions = torch.arange(tokens.shape[1]).unsqueeze(0)
    logits = model(tokens, positions, None, runtime_gather_output=True)
    return logits[0, len(prompt) - 1:].argmax(dim=-1).tolist()
