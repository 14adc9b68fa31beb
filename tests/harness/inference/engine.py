"""The tiny GPT engine both inference harness scripts serve: a megatron-core GPT with random
weights behind ``GPTInferenceWrapper``, ``TextGenerationController`` and
``StaticInferenceEngine``, built as Megatron-LM's ``get_inference_engine`` builds it, and the
text-generation flags its entry scripts add. Prompts are space-separated token ids ("3 1 4")."""

from megatron.core.inference.contexts import StaticInferenceContext
from megatron.core.inference.engines import StaticInferenceEngine
from megatron.core.inference.model_inference_wrappers.gpt.gpt_inference_wrapper import (
    GPTInferenceWrapper,
)
from megatron.core.inference.model_inference_wrappers.inference_wrapper_config import (
    InferenceWrapperConfig,
)
from megatron.core.inference.text_generation_controllers.text_generation_controller import (
    TextGenerationController,
)
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.training import get_args
from megatron.training.arguments import core_transformer_config_from_args

# The stand-in validates arguments as for training; a server needs none of these.
ARGS_DEFAULTS = {"train_iters": 1, "lr": 0.0, "micro_batch_size": 1}


class IdTokenizer:
    """Prompts are space-separated token ids; the last id of the vocabulary ends a document."""

    def __init__(self, vocab_size):
        self.vocab_size = vocab_size
        self.eod = vocab_size - 1
        self.bos = None  # no beginning-of-document token, as Megatron's NullTokenizer

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
