"""torch CPU tensors through tessera: marshalling, GEMMs in place, utilities returning tensors with
DeepGEMM's exact strides. Skipped when torch is not installed."""
import zlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tessera  # noqa: E402 - after the skip
from tessera import deep_gemm  # noqa: E402
from tessera._arrays import to_ref  # noqa: E402
from tessera.deep_gemm.testing import calc_diff  # noqa: E402


@pytest.fixture
def gen(request):
    return torch.Generator().manual_seed(zlib.crc32(request.node.nodeid.encode()))


def test_tensor_refs_use_data_ptr_and_element_strides():
    base = torch.zeros((6, 10), dtype=torch.bfloat16)
    view = base[1:5:2, 2:9]
    ref = to_ref(view, "fn", "x")
    assert ref.dtype == "bfloat16" and ref.ptr == view.data_ptr() == base.data_ptr() + 12 * 2
    assert list(ref.shape) == [2, 7] and list(ref.strides) == [20, 1]
    assert to_ref(torch.zeros(3, dtype=torch.float8_e4m3fn), "fn", "x").dtype == "float8_e4m3fn"
    assert to_ref(torch.zeros(3, dtype=torch.int8), "fn", "x").dtype == "int8"


def test_non_cpu_tensors_and_unknown_dtypes_are_rejected():
    with pytest.raises(ValueError, match="fn: argument 'a' must be a CPU tensor, got device meta"):
        to_ref(torch.empty(4, device="meta"), "fn", "a")
    with pytest.raises(ValueError, match="fn: argument 'a' has unsupported dtype torch.complex64"):
        to_ref(torch.zeros(4, dtype=torch.complex64), "fn", "a")


@pytest.mark.parametrize("layout", ["nt", "nn", "tn", "tt"])
def test_bf16_gemm_with_tensors(gen, layout):
    m, n, k = 33, 72, 576
    a = torch.randn((m, k), generator=gen).bfloat16()
    b = torch.randn((n, k), generator=gen).bfloat16()
    ga = a if layout[0] == "n" else a.t().contiguous()
    gb = b if layout[1] == "t" else b.t().contiguous()
    d = torch.empty((m, n), dtype=torch.float32)
    assert getattr(deep_gemm, f"bf16_gemm_{layout}")(ga, gb, d) is None
    assert calc_diff(d, a.double() @ b.double().t()) < 1e-5


def test_fp8_gemm_with_tensors_and_both_sf_styles(gen):
    m, n, k = 40, 256, 2112
    x = torch.randn((m, k), generator=gen).bfloat16()
    y = torch.randn((n, k), generator=gen).bfloat16()
    ref = x.double() @ y.double().t()
    for use_ue8m0 in (False, True):
        qa, sfa = deep_gemm.per_token_cast_to_fp8(x, use_ue8m0)
        qb, sfb = deep_gemm.per_block_cast_to_fp8(y, use_ue8m0)
        assert isinstance(qa, torch.Tensor) and qa.dtype == torch.float8_e4m3fn and sfa.dtype == torch.float32
        if use_ue8m0:
            sfa = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sfa)
            sfb = deep_gemm.transform_sf_into_required_layout(sfb, n, k, (1, 128, 128), is_sfa=False)
            assert sfa.dtype == torch.int32 and sfa.stride() == (1, 40)
        d = torch.empty((m, n), dtype=torch.bfloat16)
        deep_gemm.fp8_gemm_nt((qa, sfa), (qb, sfb), d)
        assert calc_diff(d, ref) < 1e-3


def test_c_is_d_with_tensors(gen):
    a = torch.randn((16, 128), generator=gen).bfloat16()
    b = torch.randn((24, 128), generator=gen).bfloat16()
    d = torch.randn((16, 24), generator=gen)
    expected = d.double() + a.double() @ b.double().t()
    deep_gemm.bf16_gemm_nt(a, b, d, c=d)
    assert calc_diff(d, expected) < 1e-5


def test_layout_utilities_return_tensors_with_exact_strides(gen):
    sf = torch.rand((5, 3), generator=gen)
    out = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
    assert isinstance(out, torch.Tensor) and out.shape == (5, 3) and out.stride() == (1, 8)
    assert torch.equal(out, sf)
    sf3 = torch.exp2(torch.randint(-5, 5, (2, 6, 9), generator=gen).float())
    packed = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf3)
    assert packed.shape == (2, 6, 3) and packed.stride() == (24, 1, 8) and packed.dtype == torch.int32
    np.testing.assert_array_equal(packed.numpy(), deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf3.numpy()))


def test_bad_tensor_inputs_leave_d_untouched(gen):
    a = torch.randn((8, 64), generator=gen)  # float32, not bfloat16
    b = torch.randn((16, 64), generator=gen).bfloat16()
    d = torch.full((8, 16), -7.25)
    with pytest.raises(tessera.InvalidArgumentError, match="bf16_gemm_nt: argument 'a' must have dtype bfloat16"):
        deep_gemm.bf16_gemm_nt(a, b, d)
    assert torch.all(d == -7.25)


@pytest.mark.parametrize("use_ue8m0", [False, True])
def test_per_token_cast_is_bit_identical_to_torch_arithmetic(gen, use_ue8m0):
    """The spec's rule computed with torch's own ops and float8 cast, bit for bit."""
    m, n = 7, 300
    x = (torch.randn((m, n), generator=gen) * 5).bfloat16()
    q, sf = deep_gemm.per_token_cast_to_fp8(x, use_ue8m0)
    blocks = torch.nn.functional.pad(x.float(), (0, 384 - n)).view(m, 3, 128)
    ref_sf = blocks.abs().amax(dim=2).clamp(min=1e-4) / 448.0
    if use_ue8m0:
        mantissa, exponent = torch.frexp(ref_sf)  # ref_sf = mantissa * 2^exponent, mantissa in [0.5, 1)
        ref_sf = torch.ldexp(torch.ones_like(ref_sf), exponent - (mantissa == 0.5).int())
    ref_q = (blocks * (1.0 / ref_sf).unsqueeze(2)).to(torch.float8_e4m3fn).view(m, 384)[:, :n]
    assert torch.equal(sf, ref_sf)
    assert torch.equal(q.view(torch.uint8), ref_q.contiguous().view(torch.uint8))
