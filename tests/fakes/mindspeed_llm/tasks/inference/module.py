"""Mirror of ``mindspeed_llm.tasks.inference.module`` (master), what ``inference.py`` calls:
``MegatronModuleForCausalLM.generate`` tokenizes the prompt, builds the token stream of its
generation loop (a generator: nothing is computed yet) and then either consumes it itself
(``stream=False``: the text is returned) or returns it (``stream=True``, the chat task: each
item is the text so far, computed as the caller iterates). The loop raises ``ValueError`` when
prompt + ``max_new_tokens`` exceed the position limit, at its first step, so with ``stream=True``
the caller's iteration raises it. Each token is one call of Megatron-LM's legacy ``ForwardStep``
(``megatron_standin`` has it). The model is a tiny embedding + linear; words are token ids."""

import torch

MAX_POSITIONS = 16
VOCAB = 32


def generate_tokens_probs_and_return_on_first_stage(model, tokens, lengths):
    """MindSpeed-LLM's generation loop (it replaces Megatron-LM's): one forward per position."""
    from megatron.inference.text_generation.forward_step import (
        ForwardStep, _build_attention_mask_and_position_ids)

    if tokens.size(1) > MAX_POSITIONS:
        raise ValueError("Length of prompt + tokens_to_generate longer than allowed")
    forward_step = ForwardStep(model)
    with torch.no_grad():
        attention_mask, position_ids = _build_attention_mask_and_position_ids(tokens)
        for context_length in range(int(lengths.min()), tokens.size(1)):
            logits = forward_step(tokens[:, :context_length], position_ids, attention_mask)
            tokens[:, context_length] = logits[:, -1, :].argmax(dim=-1)
            yield tokens[:, :context_length + 1], lengths, None


class MegatronModuleForCausalLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 8), torch.nn.Linear(8, VOCAB))
        self.stream = False
        self.max_new_tokens = 0

    def forward(self, tokens):
        return self.net(tokens)

    def generate(self, input_ids=None, broadcast=False, **kwargs):
        self.stream = kwargs.pop("stream", False)
        self.max_new_tokens = kwargs.pop("max_new_tokens", 0)
        prompt = [int(word) % VOCAB for word in (input_ids or "1").split()]
        tokens = torch.tensor([prompt + [0] * self.max_new_tokens])
        token_stream = generate_tokens_probs_and_return_on_first_stage(
            self, tokens, torch.tensor([len(prompt)]))
        return self._token_generator(token_stream)

    def _post_processing(self, output, context_lengths):
        return " ".join(str(int(t)) for t in output[0][int(context_lengths[0]):])

    def _yield(self, token_stream):
        output, context_lengths = None, None
        for output, context_lengths, _ in token_stream:
            if self.stream:
                yield self._post_processing(output, context_lengths)
        if not self.stream:
            yield self._post_processing(output, context_lengths)

    def _token_generator(self, token_stream):
        token_stream = self._yield(token_stream)
        if not self.stream:
            full_output = None
            for tmp in token_stream:
                full_output = tmp
            return full_output
        return token_stream
