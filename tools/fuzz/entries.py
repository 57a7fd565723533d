"""Valid calls of tessera's public Python entries, the seeds the bad-input campaign mutates.

Each entry builds fresh arguments (a dict name -> value) and names which of them are outputs the call
writes into (pre-filled with a sentinel so a rejected call can be seen to leave them untouched).
"""
import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
SENTINEL = -7.25


def _rng(seed=0):
    return np.random.default_rng(seed)


def _out(shape, dtype):
    return np.full(shape, SENTINEL, np.float32).astype(dtype)


class Entry:
    """A public call: `build()` -> kwargs, `call(kwargs)` runs it, `outputs` the in-place outputs."""

    def __init__(self, name, build, call, outputs=()):
        self.name, self.build, self.call, self.outputs = name, build, call, tuple(outputs)


def _bf16_gemm():
    r = _rng(1)
    return {"a": r.standard_normal((8, 64)).astype(BF16), "b": r.standard_normal((16, 64)).astype(BF16),
            "d": _out((8, 16), np.float32)}


def _fp8_gemm():
    from tessera.deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8
    r = _rng(2)
    return {"a": per_token_cast_to_fp8(r.standard_normal((8, 256)).astype(np.float32), use_ue8m0=False),
            "b": per_block_cast_to_fp8(r.standard_normal((128, 256)).astype(np.float32), use_ue8m0=False),
            "d": _out((8, 128), BF16)}


def _einsum():
    r = _rng(3)
    return {"expr": "bhr,hdr->bhd", "a": r.standard_normal((4, 2, 64)).astype(BF16),
            "b": r.standard_normal((2, 32, 64)).astype(BF16), "d": _out((4, 2, 32), BF16)}


def _topk():
    r = _rng(4)
    return {"input": r.standard_normal((4, 300)).astype(np.float32), "topk": 8}


def _sparse_fwd():
    r = _rng(5)
    return {"q": (r.standard_normal((4, 16, 576)) / 8).astype(BF16),
            "kv": (r.standard_normal((128, 1, 576)) / 8).astype(BF16),
            "indices": np.stack([r.permutation(128)[:64] for _ in range(4)]).astype(np.int32).reshape(4, 1, 64),
            "sm_scale": 576 ** -0.5}


def _per_token_cast():
    return {"x": _rng(6).standard_normal((8, 256)).astype(BF16), "use_ue8m0": False}


def _mqa_logits():
    r = _rng(7)
    s, skv, h, d = 8, 64, 8, 128
    q = r.standard_normal((s, h, d)).astype(E4M3)
    kv = (r.standard_normal((skv, d)).astype(E4M3), np.ones(skv, np.float32))
    return {"q": q, "kv": kv, "weights": np.ones((s, h), np.float32),
            "cu_seq_len_k_start": np.zeros(s, np.int32), "cu_seq_len_k_end": np.full(s, skv, np.int32)}


def _grouped_bf16():
    r = _rng(8)
    layout = np.repeat(np.arange(2, dtype=np.int32), 128)  # 256 rows: 128 per group
    return {"a": r.standard_normal((256, 64)).astype(BF16), "b": r.standard_normal((2, 32, 64)).astype(BF16),
            "d": _out((256, 32), BF16), "grouped_layout": layout}


def _dense_decode():
    from tessera import flash_mla
    r = _rng(9)
    b, s_q, h_q, d, block, blocks = 2, 1, 16, 576, 64, 4
    seqlens = np.array([100, 200], np.int32)
    return {"q": (r.standard_normal((b, s_q, h_q, d)) / 8).astype(BF16),
            "k_cache": (r.standard_normal((blocks * b, block, 1, d)) / 8).astype(BF16),
            "block_table": np.arange(blocks * b, dtype=np.int32).reshape(b, blocks), "cache_seqlens": seqlens,
            "head_dim_v": 512, "tile_scheduler_metadata": flash_mla.get_mla_metadata()[0]}


def _paged_mqa():
    from tessera import deep_gemm
    r = _rng(10)
    block_kv, heads, dim, blocks = 64, 8, 128, 4
    lens = np.array([100], np.int32)
    return {"q": r.standard_normal((1, 1, heads, dim)).astype(E4M3),
            "kv_cache": r.integers(0, 100, (blocks, block_kv, 1, dim + 4)).astype(np.uint8),
            "weights": np.ones((1, heads), np.float32), "context_lens": lens,
            "block_table": np.arange(blocks, dtype=np.int32).reshape(1, blocks),
            "schedule_meta": deep_gemm.get_paged_mqa_logits_metadata(lens, block_kv, 4),
            "max_context_len": blocks * block_kv}


def _paged_metadata():
    return {"context_lens": np.array([100, 7], np.int32), "block_kv": 64, "num_sms": 4}


def entries():
    from tessera import deep_gemm, deep_select, flash_mla
    from tessera.deep_gemm.utils import per_token_cast_to_fp8
    return [
        Entry("deep_gemm.bf16_gemm_nt", _bf16_gemm, lambda k: deep_gemm.bf16_gemm_nt(**k), ["d"]),
        Entry("deep_gemm.fp8_gemm_nt", _fp8_gemm, lambda k: deep_gemm.fp8_gemm_nt(**k), ["d"]),
        Entry("deep_gemm.einsum", _einsum, lambda k: deep_gemm.einsum(**k), ["d"]),
        Entry("deep_gemm.fp8_mqa_logits", _mqa_logits, lambda k: deep_gemm.fp8_mqa_logits(**k)),
        Entry("deep_gemm.fp8_paged_mqa_logits", _paged_mqa, lambda k: deep_gemm.fp8_paged_mqa_logits(**k)),
        Entry("deep_gemm.get_paged_mqa_logits_metadata", _paged_metadata,
              lambda k: deep_gemm.get_paged_mqa_logits_metadata(**k)),
        Entry("deep_gemm.m_grouped_bf16_gemm_nt_contiguous", _grouped_bf16,
              lambda k: deep_gemm.m_grouped_bf16_gemm_nt_contiguous(**k), ["d"]),
        Entry("deep_gemm.utils.per_token_cast_to_fp8", _per_token_cast, lambda k: per_token_cast_to_fp8(**k)),
        Entry("deep_select.topk", _topk, lambda k: deep_select.topk(**k)),
        Entry("flash_mla.flash_mla_sparse_fwd", _sparse_fwd, lambda k: flash_mla.flash_mla_sparse_fwd(**k)),
        Entry("flash_mla.flash_mla_with_kvcache (dense)", _dense_decode, lambda k: flash_mla.flash_mla_with_kvcache(**k)),
    ]
