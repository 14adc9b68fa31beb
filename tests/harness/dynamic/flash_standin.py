"""Pure-torch stand-ins for the two flash-attn kernels megatron-core's dynamic engine calls.

``Attention.flash_decode_and_prefill`` (megatron/core/transformer/attention.py) calls
``flash_attn_varlen_func`` for steps with a prefill and ``flash_attn_with_kvcache`` for
decode-only steps, both over the paged KV cache (``block_table``). flash-attn needs CUDA, so on
the CPU these compute the same thing with plain tensor ops, one sequence at a time:

* keys of sequence ``i`` are the first ``seqlen_k[i]`` rows of its blocks, in block-table order;
* ``causal`` is aligned bottom-right (query ``r`` of ``sq`` sees key ``c`` iff
  ``c <= r + sk - sq``), as flash-attn >= 2.1 does, so a chunk of a prompt sees the cached
  earlier chunks;
* GQA: query head ``h`` reads key/value head ``h // (Hq // Hk)``;
* ``window_size=(left, right)``, ``-1`` meaning unbounded, as flash-attn;
* rows past the last sequence (the context pads the batch) come out as zeros.

Slow but exact enough (float32 softmax) for tiny test models. :func:`install` swaps them in for
the names ``megatron.core.transformer.attention`` bound at import and satisfies its
``is_fa_min_version("2.7.3")`` check there (nowhere else).
"""

import math

import torch

ATTENTION_MODULE = "megatron.core.transformer.attention"


def _attend(q, k, v, scale, causal, window_size):
    """One sequence: q (sq, Hq, D), k/v (sk, Hk, D) -> (out (sq, Hq, D), lse (Hq, sq))."""
    sq, num_heads, _ = q.shape
    sk, num_kv_heads, _ = k.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"{num_heads} query heads are not a multiple of {num_kv_heads} kv heads")
    groups = num_heads // num_kv_heads
    k = k.repeat_interleave(groups, dim=1)
    v = v.repeat_interleave(groups, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k.float()) * scale
    # Bottom-right alignment: the last query row is the last key.
    diagonal = torch.arange(sq).unsqueeze(1) + (sk - sq)
    cols = torch.arange(sk).unsqueeze(0)
    allowed = torch.ones(sq, sk, dtype=torch.bool)
    left, right = window_size if window_size is not None else (-1, -1)
    if causal:
        right = 0 if right < 0 else min(right, 0)
    if right >= 0:
        allowed &= cols <= diagonal + right
    if left >= 0:
        allowed &= cols >= diagonal - left
    scores = scores.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse.unsqueeze(-1)).nan_to_num(0.0)  # a row with no key: zeros
    out = torch.einsum("hqk,khd->qhd", probs, v.float()).to(q.dtype)
    return out, lse


def _paged(cache, blocks, length):
    """The first ``length`` rows of one sequence's blocks of a (num_blocks, block, H, D) cache."""
    block_size = cache.shape[1]
    used = blocks[: math.ceil(length / block_size)].long()
    return cache[used].reshape(-1, *cache.shape[2:])[:length]


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                           softcap=0.0, alibi_slopes=None, deterministic=False,
                           return_attn_probs=False, block_table=None):
    """flash-attn 2's varlen kernel: q (total_q, Hq, D); k/v packed (total_k, Hk, D) or, with
    ``block_table`` (B, max_blocks), a paged cache (num_blocks, block_size, Hk, D)."""
    if dropout_p or softcap or alibi_slopes is not None:
        raise NotImplementedError("the CPU stand-in has no dropout, softcap or ALiBi")
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
    out = torch.zeros_like(q)
    lse = torch.full((q.shape[1], q.shape[0]), float("-inf"))
    cu_q, cu_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for i in range(len(cu_q) - 1):
        q_start, q_end = cu_q[i], cu_q[i + 1]
        sk = cu_k[i + 1] - cu_k[i]
        if q_end == q_start or sk == 0:
            continue
        if block_table is None:
            keys, values = k[cu_k[i]:cu_k[i + 1]], v[cu_k[i]:cu_k[i + 1]]
        else:
            keys, values = _paged(k, block_table[i], sk), _paged(v, block_table[i], sk)
        seq_out, seq_lse = _attend(q[q_start:q_end], keys, values, scale, causal, window_size)
        out[q_start:q_end] = seq_out
        lse[:, q_start:q_end] = seq_lse
    if return_attn_probs:
        return out, lse, None
    return out


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, block_table=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                            return_softmax_lse=False):
    """flash-attn 2's decode kernel: q (B, Sq, Hq, D) over the first ``cache_seqlens[b]`` cached
    keys of each sequence; the cache is (B, S, Hk, D), or paged with ``block_table``."""
    if k is not None or v is not None or rotary_cos is not None or cache_batch_idx is not None \
            or cache_leftpad is not None or softcap or alibi_slopes is not None:
        raise NotImplementedError("the CPU stand-in attends to an already appended cache only")
    batch, sq = q.shape[0], q.shape[1]
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
    if isinstance(cache_seqlens, int):
        lengths = [cache_seqlens] * batch
    else:
        lengths = cache_seqlens.tolist()
    out = torch.zeros_like(q)
    lse = torch.full((batch, q.shape[2], sq), float("-inf"))
    for b in range(batch):
        sk = lengths[b]
        if sk == 0:
            continue
        if block_table is None:
            keys, values = k_cache[b, :sk], v_cache[b, :sk]
        else:
            keys, values = _paged(k_cache, block_table[b], sk), _paged(v_cache, block_table[b], sk)
        out[b], lse[b] = _attend(q[b], keys, values, scale, causal, window_size)
    if return_softmax_lse:
        return out, lse
    return out


def install():
    """Bind the stand-ins where megatron-core's attention looks them up (module globals)."""
    import importlib

    attention = importlib.import_module(ATTENTION_MODULE)
    attention.flash_attn_varlen_func = flash_attn_varlen_func
    attention.flash_attn_with_kvcache = flash_attn_with_kvcache
    # The dynamic-batching assert asks for flash-attn >= 2.7.3; the stand-in has that API.
    attention.is_fa_min_version = lambda version, check_equality=True: True
