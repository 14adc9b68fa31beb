"""The local attention (``--transformer-impl local``) taking the packed-sequence arguments.

Megatron-LM's RL forward (``train_rl.forward_step`` and the log-prob pass of
``rl_utils.get_logprobs``) always passes ``packed_seq_params`` (``qkv_format='thd'``, one
``cu_seqlens`` entry pair per sequence), even without ``--rl-use-sequence-packing``.
megatron-core's ``Attention.forward`` then squeezes the batch dimension (``[t, heads, dim]``)
and applies the rotary embedding per sequence, but the local ``DotProductAttention`` asserts
``packed_seq_params is None`` (only TE and flash kernels read packed sequences).

:func:`install` wraps ``DotProductAttention.forward``: with THD arguments it runs the original,
unpacked, once per sequence of ``cu_seqlens`` (each sequence ``[s_i, 1, heads, dim]``, causal
within itself, as the packed kernels do) and returns the sequences packed again
(``[t, 1, heads*dim]``, which ``Attention.forward`` reshapes as it does a packed kernel's
output). Anything else (no packed arguments, or ``sbhd``) goes to the original untouched.
Self-attention only: different query and key boundaries are refused by name.
"""

import functools

import torch

_INSTALLED_FLAG = "_harness_packed_local_attention"


def _boundaries(params):
    q = params.cu_seqlens_q_padded if params.cu_seqlens_q_padded is not None \
        else params.cu_seqlens_q
    kv = params.cu_seqlens_kv_padded if params.cu_seqlens_kv_padded is not None \
        else params.cu_seqlens_kv
    q, kv = [int(x) for x in q.tolist()], [int(x) for x in kv.tolist()]
    if q != kv:
        raise NotImplementedError(f"harness packed local attention: query boundaries {q} differ "
                                  f"from key boundaries {kv} (self-attention only)")
    return q


def _unpacked(forward):
    @functools.wraps(forward)
    def forward_per_sequence(self, query, key, value, attention_mask, attn_mask_type=None,
                             attention_bias=None, packed_seq_params=None):
        if packed_seq_params is None or packed_seq_params.qkv_format != "thd":
            return forward(self, query, key, value, attention_mask, attn_mask_type,
                           attention_bias, packed_seq_params)
        bounds = _boundaries(packed_seq_params)
        outputs = []
        for start, end in zip(bounds[:-1], bounds[1:]):
            if end <= start:
                continue
            outputs.append(forward(self, query[start:end].unsqueeze(1),
                                   key[start:end].unsqueeze(1), value[start:end].unsqueeze(1),
                                   None, attn_mask_type, attention_bias, None))
        total = query.size(0)
        if bounds[-1] < total:  # tokens past the last sequence (padding): zero output
            tail = outputs[0].new_zeros((total - bounds[-1],) + tuple(outputs[0].shape[1:]))
            outputs.append(tail)
        return torch.cat(outputs, dim=0)

    return forward_per_sequence


def install():
    from megatron.core.transformer import dot_product_attention as module

    cls = module.DotProductAttention
    if getattr(cls, _INSTALLED_FLAG, False):
        return
    cls.forward = _unpacked(cls.forward)
    setattr(cls, _INSTALLED_FLAG, True)
