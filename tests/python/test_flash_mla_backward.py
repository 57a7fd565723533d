"""flash_attn_varlen_func's autograd (torch): dq, dk, dv against float64 torch autograd of the same math,
causal and not, GQA, odd lengths; lse's gradient; packed forms; bitwise determinism across thread counts;
numpy and no-grad calls stay forward-only. Skipped when torch is not installed."""
import pytest

import tessera
from tessera import flash_mla

torch = pytest.importorskip("torch")


def make(seed, q_lens, kv_lens, h_q, h_kv, d_qk, d_v, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(sum(q_lens), h_q, d_qk, generator=g).to(dtype)
    k = torch.randn(sum(kv_lens), h_kv, d_qk, generator=g).to(dtype)
    v = torch.randn(sum(kv_lens), h_kv, d_v, generator=g).to(dtype)
    dout = torch.randn(sum(q_lens), h_q, d_v, generator=g).to(dtype)
    cu_q = torch.tensor([0] + q_lens, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    cu_kv = torch.tensor([0] + kv_lens, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    return q, k, v, dout, cu_q, cu_kv


def reference(q, k, v, q_lens, kv_lens, causal, scale):
    """float64 out [total_q, h_q, d_v] and lse [total_q, h_q], differentiable (torch autograd)."""
    hp = q.shape[1] // k.shape[1]
    outs, lses = [], []
    q0 = k0 = 0
    for nq, nk in zip(q_lens, kv_lens):
        qi = q[q0:q0 + nq].transpose(0, 1)                                 # [h, nq, d]
        ki = k[k0:k0 + nk].transpose(0, 1).repeat_interleave(hp, dim=0)   # [h, nk, d]
        vi = v[k0:k0 + nk].transpose(0, 1).repeat_interleave(hp, dim=0)
        s = qi @ ki.transpose(1, 2) * scale
        if causal:
            keep = torch.ones(nq, nk, dtype=torch.bool).tril(diagonal=nk - nq)
            s = s.masked_fill(~keep, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)                                   # [h, nq]
        p = torch.exp(s - lse.unsqueeze(-1)).nan_to_num(0.0)               # rows that see nothing: 0
        outs.append((p @ vi).transpose(0, 1))
        lses.append(lse.transpose(0, 1))
        q0, k0 = q0 + nq, k0 + nk
    return torch.cat(outs), torch.cat(lses)


def grads_of(fn, q, k, v):
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    fn(q, k, v)
    return q.grad, k.grad, v.grad


def bf16_operands(dtype):
    """Whether the active level's backward takes bf16 operands for these inputs (amx, avx512bf16: P and dS
    rounded to bf16, as FlashMLA's GPU kernels do)."""
    return dtype == torch.bfloat16 and tessera.cpu_info()["active_isa"] in ("amx", "avx512bf16")


def assert_grad_close(name, got, ref):
    # FlashMLA's FMHA backward check: |err| < 1e-3 or relative < 8/128 per element, cosine diff < 7e-6.
    # Its abs 1e-3 is for inputs drawn at randn/10 (gradients ~1e-3 of these); with bf16 operands the
    # rounding of dS leaves ~4e-3 of a unit-scale gradient on near-zero elements, so abs 1e-2 there
    # (tests/cpp/attention/mla_varlen_backward_test.cc).
    abs_tol = 1e-2 if bf16_operands(got.dtype) else 1e-3
    got, ref = got.double(), ref.double()
    err = (got - ref).abs()
    ok = (err < abs_tol) | (err / (ref.abs() + 1e-6) < 8.01 / 128)
    assert bool(ok.all()), f"{name}: {int((~ok).sum())} elements out of tolerance, max err {float(err.max())}"
    cos = 1 - 2 * (got * ref).sum() / ((got * got).sum() + (ref * ref).sum())
    assert float(cos) < 7e-6, f"{name}: cosine diff {float(cos)}"


CASES = [
    # q_lens, kv_lens, h_q, h_kv, d_qk, d_v, causal
    ([37, 0, 71], [101, 0, 133], 4, 4, 192, 128, True),
    ([33, 65], [129, 70], 6, 2, 64, 64, False),
    ([50, 7], [20, 7], 4, 1, 128, 96, True),  # causal with more queries than keys: some rows see nothing
]


@pytest.mark.parametrize("q_lens,kv_lens,h_q,h_kv,d_qk,d_v,causal", CASES)
def test_gradients_match_float64(q_lens, kv_lens, h_q, h_kv, d_qk, d_v, causal):
    q, k, v, dout, cu_q, cu_kv = make(1, q_lens, kv_lens, h_q, h_kv, d_qk, d_v)
    scale = 0.11

    def run(q_, k_, v_):
        out, _ = flash_mla.flash_attn_varlen_func(q_, k_, v_, cu_q, cu_kv, max(q_lens), max(kv_lens),
                                                  softmax_scale=scale, causal=causal)
        assert out.requires_grad and out.dtype == torch.bfloat16
        out.backward(dout)

    def run_ref(q_, k_, v_):
        out, _ = reference(q_, k_, v_, q_lens, kv_lens, causal, scale)
        out.backward(dout.double())

    got = grads_of(run, q, k, v)
    ref = grads_of(run_ref, q.double(), k.double(), v.double())
    for name, g, r in zip(("dq", "dk", "dv"), got, ref):
        assert g.dtype == torch.bfloat16
        assert_grad_close(name, g, r)


def test_lse_gradient_and_fp16():
    q_lens, kv_lens = [45, 19], [77, 150]
    q, k, v, dout, cu_q, cu_kv = make(2, q_lens, kv_lens, 4, 2, 80, 48, dtype=torch.float16)
    w = torch.randn(sum(q_lens), 4, generator=torch.Generator().manual_seed(3))

    def run(q_, k_, v_):
        out, lse = flash_mla.flash_attn_varlen_func(q_, k_, v_, cu_q, cu_kv, max(q_lens), max(kv_lens), causal=True)
        ((out.float() * dout.float()).sum() + (lse * w).sum()).backward()

    def run_ref(q_, k_, v_):
        out, lse = reference(q_, k_, v_, q_lens, kv_lens, True, 80 ** -0.5)
        ((out * dout.double()).sum() + (lse * w.double()).sum()).backward()

    got = grads_of(run, q, k, v)
    ref = grads_of(run_ref, q.double(), k.double(), v.double())
    for name, g, r in zip(("dq", "dk", "dv"), got, ref):
        assert g.dtype == torch.float16
        assert_grad_close(name, g, r)


def test_packed_forms_flow_gradients_to_the_packed_tensor():
    q, k, v, dout, cu, _ = make(4, [21, 40], [21, 40], 2, 2, 64, 64)
    qkv = torch.cat([q, k, v], dim=-1).requires_grad_()
    out, _ = flash_mla.flash_attn_varlen_qkvpacked_func(qkv, cu, 40, 64, causal=True)
    out.backward(dout)
    dq, dk, dv = grads_of(lambda a, b, c: flash_mla.flash_attn_varlen_func(
        a, b, c, cu, cu, 40, 40, causal=True)[0].backward(dout), q, k, v)
    assert torch.equal(qkv.grad, torch.cat([dq, dk, dv], dim=-1))


def test_same_bits_for_any_thread_count():
    q, k, v, dout, cu_q, cu_kv = make(5, [3, 77], [300, 91], 4, 2, 128, 128)
    runs = []
    saved = tessera.num_threads()
    try:
        for threads in (1, 2, 3):
            tessera.set_num_threads(threads)
            runs.append(grads_of(lambda a, b, c: flash_mla.flash_attn_varlen_func(
                a, b, c, cu_q, cu_kv, 77, 300, causal=True)[0].backward(dout), q, k, v))
    finally:
        tessera.set_num_threads(saved)
    for other in runs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(runs[0], other))


def test_forward_only_without_grad():
    q, k, v, _, cu_q, cu_kv = make(6, [5], [9], 2, 2, 64, 64)
    out, lse = flash_mla.flash_attn_varlen_func(q, k, v, cu_q, cu_kv, 5, 9)
    assert not out.requires_grad and out.grad_fn is None
    with torch.no_grad():
        out, _ = flash_mla.flash_attn_varlen_func(q.requires_grad_(), k, v, cu_q, cu_kv, 5, 9)
    assert out.grad_fn is None
    # The grad path returns the same forward bits.
    out2, lse2 = flash_mla.flash_attn_varlen_func(q, k, v, cu_q, cu_kv, 5, 9)
    assert out2.grad_fn is not None
    assert torch.equal(out2.detach(), out) and torch.equal(lse2.detach(), lse)
