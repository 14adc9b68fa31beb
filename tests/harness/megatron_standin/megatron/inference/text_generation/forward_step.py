"""Stand-in for Megatron-LM's legacy ``megatron/inference/text_generation/forward_step.py`` (to
core_v0.14; not in the megatron-core wheel): ``ForwardStep(model, inference_context)`` is built
once per generation and called once per token, each call one forward of the model (the real one
adds pipeline receives and sends around it). MindSpeed-LLM's generation loop uses it."""

import torch


class ForwardStep:
    def __init__(self, model, inference_context=None):
        model.eval()
        self.model = model
        self.inference_context = inference_context

    def __call__(self, tokens, position_ids, attention_mask, recv_buffer_seq_length=None):
        return self.model(tokens)


def _build_attention_mask_and_position_ids(tokens):
    positions = torch.arange(tokens.size(1)).unsqueeze(0).expand_as(tokens)
    return None, positions
