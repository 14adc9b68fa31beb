"""The harness's pure-torch flash-attn stand-in computes what PyTorch's SDPA computes.

``harness.dynamic.flash_standin`` replaces flash-attn's two kernels for megatron-core's dynamic
engine on the CPU; if it were wrong, every dynamic-engine test would test a wrong model. Only
torch is needed, so this runs on every leg.
"""

import pytest
import torch
import torch.nn.functional as F

from harness.dynamic import flash_standin

pytestmark = pytest.mark.e2e

HEADS, KV_HEADS, DIM, BLOCK = 4, 2, 8, 4


def sdpa(q, k, v, causal):
    """SDPA on one sequence, q (sq, Hq, D) k/v (sk, Hk, D), causal aligned bottom-right."""
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    sq, sk = q.shape[0], k.shape[0]
    mask = None
    if causal:
        mask = torch.ones(sq, sk, dtype=torch.bool).tril(diagonal=sk - sq)
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                         attn_mask=mask)
    return out.transpose(0, 1)


def paged(sequences, num_blocks=16, seed=0):
    """Scatter per-sequence (s, Hk, D) keys into a shuffled block cache; return the cache and
    the block table."""
    generator = torch.Generator().manual_seed(seed)
    cache = torch.randn(num_blocks, BLOCK, KV_HEADS, DIM, generator=generator)  # garbage around
    order = torch.randperm(num_blocks, generator=generator).tolist()
    width = max(-(-len(s) // BLOCK) for s in sequences)
    table = torch.full((len(sequences), width), -1, dtype=torch.int32)
    for row, seq in enumerate(sequences):
        for j in range(-(-len(seq) // BLOCK)):
            block = order.pop()
            table[row, j] = block
            chunk = seq[j * BLOCK:(j + 1) * BLOCK]
            cache[block, :len(chunk)] = chunk
    return cache, table


def test_varlen_causal_prefill_equals_sdpa_per_sequence_with_gqa():
    torch.manual_seed(1)
    lengths = [5, 1, 9]
    q = torch.randn(sum(lengths), HEADS, DIM)
    k = torch.randn(sum(lengths), KV_HEADS, DIM)
    v = torch.randn(sum(lengths), KV_HEADS, DIM)
    cu = torch.tensor([0, 5, 6, 15], dtype=torch.int32)
    out = flash_standin.flash_attn_varlen_func(q, k, v, cu, cu, 9, 9, causal=True)
    for start, end in zip(cu[:-1].tolist(), cu[1:].tolist()):
        torch.testing.assert_close(out[start:end], sdpa(q[start:end], k[start:end],
                                                        v[start:end], causal=True))


def test_varlen_over_a_paged_cache_aligns_a_prompt_chunk_bottom_right():
    # A chunk of 3 new queries after 6 cached tokens (chunked prefill), beside a 1-token decode.
    torch.manual_seed(2)
    keys = [torch.randn(9, KV_HEADS, DIM), torch.randn(7, KV_HEADS, DIM)]
    values = [torch.randn(9, KV_HEADS, DIM), torch.randn(7, KV_HEADS, DIM)]
    k_cache, table = paged(keys, seed=3)
    v_cache, _ = paged(values, seed=3)
    q = torch.randn(4, HEADS, DIM)
    cu_q = torch.tensor([0, 3, 4], dtype=torch.int32)
    cu_k = torch.tensor([0, 9, 16], dtype=torch.int32)
    out = flash_standin.flash_attn_varlen_func(q, k_cache, v_cache, cu_q, cu_k, 3, 9,
                                               causal=True, block_table=table)
    torch.testing.assert_close(out[:3], sdpa(q[:3], keys[0], values[0], causal=True))
    torch.testing.assert_close(out[3:], sdpa(q[3:], keys[1], values[1], causal=True))


def test_decode_with_kvcache_reads_each_sequence_through_its_block_table():
    torch.manual_seed(4)
    keys = [torch.randn(n, KV_HEADS, DIM) for n in (3, 10, 4)]
    values = [torch.randn(n, KV_HEADS, DIM) for n in (3, 10, 4)]
    k_cache, table = paged(keys, seed=5)
    v_cache, _ = paged(values, seed=5)
    q = torch.randn(3, 1, HEADS, DIM)
    lengths = torch.tensor([3, 10, 4], dtype=torch.int32)
    out = flash_standin.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths,
                                                block_table=table, causal=True)
    for b in range(3):
        torch.testing.assert_close(out[b], sdpa(q[b], keys[b], values[b], causal=True))


def test_padding_rows_past_the_last_sequence_come_out_zero():
    q = torch.randn(6, HEADS, DIM)
    k = torch.randn(4, KV_HEADS, DIM)
    cu = torch.tensor([0, 4], dtype=torch.int32)
    out = flash_standin.flash_attn_varlen_func(q, k, k.clone(), cu, cu, 4, 4, causal=True)
    assert torch.count_nonzero(out[4:]) == 0
    decode = flash_standin.flash_attn_with_kvcache(
        torch.randn(2, 1, HEADS, DIM), k.unsqueeze(0).expand(2, -1, -1, -1).contiguous(),
        k.unsqueeze(0).expand(2, -1, -1, -1).contiguous(),
        cache_seqlens=torch.tensor([4, 0], dtype=torch.int32), causal=True)
    assert torch.count_nonzero(decode[1]) == 0 and torch.count_nonzero(decode[0]) > 0


def test_softmax_lse_is_returned_in_flash_attn_2_shapes():
    q, k = torch.randn(5, HEADS, DIM), torch.randn(5, KV_HEADS, DIM)
    cu = torch.tensor([0, 5], dtype=torch.int32)
    out, lse, _ = flash_standin.flash_attn_varlen_func(q, k, k, cu, cu, 5, 5, causal=True,
                                                       return_attn_probs=True)
    assert lse.shape == (HEADS, 5)
    # Query 0 sees key 0 only: its log-sum-exp is that one score.
    scores = (q[0] * k[0].repeat_interleave(2, dim=0)).sum(-1) * DIM ** -0.5
    torch.testing.assert_close(lse[:, 0], scores)
    _, lse_decode = flash_standin.flash_attn_with_kvcache(
        q[:1].unsqueeze(0), k.unsqueeze(0), k.unsqueeze(0), cache_seqlens=5, causal=True,
        return_softmax_lse=True)
    assert lse_decode.shape == (1, HEADS, 1)


def test_a_sliding_window_limits_the_keys_each_query_sees():
    torch.manual_seed(6)
    q = torch.randn(6, HEADS, DIM)
    k, v = torch.randn(6, KV_HEADS, DIM), torch.randn(6, KV_HEADS, DIM)
    cu = torch.tensor([0, 6], dtype=torch.int32)
    out = flash_standin.flash_attn_varlen_func(q, k, v, cu, cu, 6, 6, causal=True,
                                               window_size=(1, 0))
    # The last query sees keys 4 and 5 only.
    torch.testing.assert_close(out[5:], sdpa(q[5:], k[4:], v[4:], causal=False))
