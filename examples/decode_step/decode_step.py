"""One decode step of DeepSeek sparse attention (V3.2) on the CPU with tessera, checked against float64.

    indexer q/k (FP8, paged)  --deep_gemm.fp8_paged_mqa_logits-->  logits [b, max_len]
    logits                    --deep_select.topk(2048, end=len)-->  token positions (-1 past short contexts)
    positions                 --block table-->                      flat slots of the paged caches
    slots + FP8 MLA cache     --flash_mla.flash_mla_with_kvcache-->  attention output [b, 1, h, 512]

Every stage is checked: logits against float64 over the dequantised FP8 operands, the top-k selection
exactly (distinct positions below the context length, min(selected) >= max(unselected) on the computed
logits), the slot mapping exactly, the attention against float64 over the selected tokens (the spec's
tolerances), and the whole chain against a float64 chain (float64 logits -> float64 top-k -> float64
attention). Run: python examples/decode_step/decode_step.py
"""
import sys

import ml_dtypes
import numpy as np

import tessera
from tessera import deep_gemm, deep_select, flash_mla

BLOCK = 64           # page block size of both caches
TOPK = 2048          # tokens each query attends to
INDEX_HEADS, INDEX_DIM = 64, 128
MLA_HEADS, D_QK, D_V = 64, 576, 512
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
BF16 = np.dtype(ml_dtypes.bfloat16)


def make_inputs(rng, lens):
    """Paged indexer and MLA caches sharing one block table, and this step's queries."""
    b = len(lens)
    used = [(n + BLOCK - 1) // BLOCK for n in lens]
    num_blocks = sum(used) + 3
    block_table = np.full((b, max(used) + 1), -1, dtype=np.int32)  # unused entries are never read
    ids = rng.permutation(num_blocks).astype(np.int32)
    start = 0
    for i, n in enumerate(used):
        block_table[i, :n] = ids[start:start + n]
        start += n
    # Indexer keys: e4m3 with one float32 scale per token (amax / 448); per page 64 * 128 value bytes,
    # then 64 scales.
    keys = rng.standard_normal((num_blocks, BLOCK, INDEX_DIM)).astype(np.float32)
    scales = (np.abs(keys).max(axis=2) / 448).astype(np.float32)
    values = (keys / scales[..., None]).astype(E4M3)
    pages = np.concatenate([values.view(np.uint8).reshape(num_blocks, -1),
                            scales.view(np.uint8).reshape(num_blocks, -1)], axis=1)
    index_cache = pages.reshape(num_blocks, BLOCK, 1, INDEX_DIM + 4)
    index_q = rng.standard_normal((b, 1, INDEX_HEADS, INDEX_DIM)).astype(E4M3)
    weights = rng.uniform(0, 1, (b, INDEX_HEADS)).astype(np.float32)
    # The MLA latent cache, quantised to the V32 FP8 layout, and the absorbed MLA queries.
    latent = rng.standard_normal((num_blocks, BLOCK, 1, D_QK)).astype(BF16)
    mla_cache = flash_mla.quantize_k_cache(latent, flash_mla.FP8KVCacheLayout.V32_FP8Sparse)
    mla_q = rng.standard_normal((b, 1, MLA_HEADS, D_QK)).astype(BF16)
    return dict(lens=np.array(lens, dtype=np.int32), block_table=block_table, index_cache=index_cache,
                index_q=index_q, weights=weights, mla_cache=mla_cache, mla_q=mla_q, keys=values, scales=scales)


def positions_to_slots(positions, block_table):
    """Token positions -> flat cache slots (block * BLOCK + offset); -1 stays -1."""
    safe = np.where(positions < 0, 0, positions)
    blocks = np.take_along_axis(block_table, safe // BLOCK, axis=1)
    return np.where(positions < 0, -1, blocks * BLOCK + safe % BLOCK).astype(np.int32)


def decode_step(inp):
    """The chain with tessera; returns every intermediate result."""
    lens, block_table = inp["lens"], inp["block_table"]
    max_len = int(lens.max())
    schedule = deep_gemm.get_paged_mqa_logits_metadata(lens, BLOCK, tessera.num_threads())
    logits = deep_gemm.fp8_paged_mqa_logits(inp["index_q"], inp["index_cache"], inp["weights"], lens, block_table,
                                            schedule, max_len, clean_logits=True)
    _, positions = deep_select.topk(logits, TOPK, end=lens, indices_type=np.int32, return_value=False,
                                    idx_oob_fill_value=-1)
    slots = positions_to_slots(positions, block_table)
    sched_meta, _ = flash_mla.get_mla_metadata()
    out, lse = flash_mla.flash_mla_with_kvcache(inp["mla_q"], inp["mla_cache"], None, None, D_V, sched_meta,
                                                is_fp8_kvcache=True, indices=slots[:, None, :])
    return logits, positions, slots, out, lse


# ---- float64 references ----

def reference_logits(inp):
    b = inp["index_q"].shape[0]
    k = inp["keys"].astype(np.float64) * inp["scales"][..., None]  # [blocks, 64, D]
    out = np.full((b, int(inp["lens"].max())), -np.inf)
    for i in range(b):
        n = int(inp["lens"][i])
        pos = np.arange(n)
        rows = k[inp["block_table"][i, pos // BLOCK], pos % BLOCK]  # [n, D]
        scores = inp["index_q"][i, 0].astype(np.float64) @ rows.T     # [H, n]
        out[i, :n] = inp["weights"][i].astype(np.float64) @ np.maximum(scores, 0)
    return out


def dequantized_mla_cache(cache):
    """V32 bytes -> float64 rows per slot: e4m3 -> float32 * tile scale -> bf16; RoPE copied."""
    blocks = cache.shape[0]
    raw = np.lib.stride_tricks.as_strided(cache.view(np.uint8), shape=(blocks, BLOCK, 656),
                                          strides=(cache.strides[0], 656, 1))
    tok = raw.reshape(-1, 656)
    scales = tok[:, 512:528].copy().view(np.float32)
    nope = tok[:, :512].copy().view(E4M3).astype(np.float32).reshape(-1, 4, 128) * scales[:, :, None]
    rope = tok[:, 528:].copy().view(BF16)
    return np.concatenate([nope.reshape(-1, 512).astype(BF16), rope], axis=1).astype(np.float64)


def reference_attention(q, rows, slots):
    """float64 attention of one query token's heads over the valid slots."""
    sel = rows[slots[slots >= 0]]
    if sel.shape[0] == 0:
        return np.zeros((q.shape[0], D_V)), np.full(q.shape[0], np.inf)
    s = (q.astype(np.float64) @ sel.T) * D_QK ** -0.5
    mx = s.max(axis=1, keepdims=True)
    p = np.exp(s - mx)
    return (p @ sel[:, :D_V]) / p.sum(axis=1, keepdims=True), (mx[:, 0] + np.log(p.sum(axis=1)))


def within(got, ref, abs_tol, rel_tol):
    err = np.abs(got - ref)
    return bool(((err < abs_tol) | (err / (np.abs(ref) + 1e-6) < rel_tol)).all())


def main():
    rng = np.random.default_rng(2024)
    lens = [3000, 1700]  # the second context is shorter than TOPK: its list ends with -1
    inp = make_inputs(rng, lens)
    logits, positions, slots, out, lse = decode_step(inp)
    ok = True

    ref_logits = reference_logits(inp)
    finite = np.isfinite(ref_logits)
    scale = np.abs(ref_logits[finite]).max()
    logits_ok = (np.isneginf(logits[~finite]).all() and
                 np.allclose(logits[finite], ref_logits[finite], rtol=1e-5, atol=1e-5 * scale))
    print(f"indexer logits vs float64: {'ok' if logits_ok else 'FAILED'} "
          f"(max |err| {np.abs(logits[finite] - ref_logits[finite]).max():.3g}, max |logit| {scale:.3g})")
    ok &= logits_ok

    topk_ok, overlap = True, []
    for i, n in enumerate(lens):
        sel = positions[i][positions[i] >= 0]
        topk_ok &= sel.size == min(n, TOPK) and np.unique(sel).size == sel.size and (sel < n).all()
        topk_ok &= (positions[i][sel.size:] == -1).all()
        rest = np.setdiff1d(np.arange(n), sel)
        topk_ok &= rest.size == 0 or logits[i, sel].min() >= logits[i, rest].max()
        ref_sel = np.argsort(-ref_logits[i, :n], kind="stable")[:TOPK]
        overlap.append(np.intersect1d(sel, ref_sel).size / max(sel.size, 1))
    print(f"top-k {TOPK}: {'ok' if topk_ok else 'FAILED'} (overlap with the float64 top-k: "
          f"{', '.join(f'{o:.4f}' for o in overlap)})")
    ok &= topk_ok

    slots_ok = np.array_equal(slots, positions_to_slots(positions, inp["block_table"]))
    slots_ok &= all((slots[i][positions[i] >= 0] // BLOCK == inp["block_table"][i, positions[i][positions[i] >= 0] // BLOCK]).all()
                    for i in range(len(lens)))
    print(f"block-table mapping: {'ok' if slots_ok else 'FAILED'}")
    ok &= slots_ok

    rows = dequantized_mla_cache(inp["mla_cache"])
    attn_ok, chain_ok = True, True
    for i in range(len(lens)):
        ref_out, ref_lse = reference_attention(inp["mla_q"][i, 0], rows, slots[i])
        attn_ok &= within(out[i, 0].astype(np.float64), ref_out, 1e-3, 2.01 / 128)
        attn_ok &= within(lse[i, :, 0].astype(np.float64), ref_lse, 1e-6, 8.01 / 65536)
        # The float64 chain: its own top-k of its own logits.
        n = lens[i]
        ref_pos = np.full(TOPK, -1, dtype=np.int32)
        top = np.argsort(-ref_logits[i, :n], kind="stable")[:TOPK]
        ref_pos[:top.size] = top
        chain_out, _ = reference_attention(inp["mla_q"][i, 0], rows,
                                           positions_to_slots(ref_pos[None, :], inp["block_table"][i:i + 1])[0])
        chain_ok &= within(out[i, 0].astype(np.float64), chain_out, 1e-3, 2.01 / 128)
    print(f"sparse MLA decode vs float64 over the selected tokens: {'ok' if attn_ok else 'FAILED'}")
    print(f"whole chain vs the float64 chain: {'ok' if chain_ok else 'FAILED'}")
    ok &= attn_ok and chain_ok
    print("decode step:", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
