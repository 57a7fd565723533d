"""deep_gemm runtime knobs (DeepGEMM's API, docs/gemm.md): real thread control via set/get_num_sms, inert GPU knobs
that keep DeepGEMM's defaults and validation, the contiguous-layout alignment."""
import pytest

import tessera
from tessera import deep_gemm


def test_num_sms_maps_to_the_thread_count():
    default = deep_gemm.get_num_sms()
    assert default == tessera.num_threads()
    try:
        deep_gemm.set_num_sms(1)
        assert deep_gemm.get_num_sms() == 1 == tessera.num_threads()
    finally:
        deep_gemm.set_num_sms(0)  # 0 = all
    assert deep_gemm.get_num_sms() == default


def test_num_sms_validation():
    limit = tessera.cpu_info()["logical_cpus"]
    with pytest.raises(RuntimeError, match=rf"set_num_sms: argument 'new_num_sms' must be in \[0, {limit}\]"):
        deep_gemm.set_num_sms(limit + 1)
    with pytest.raises(ValueError, match="must be in"):
        deep_gemm.set_num_sms(-1)
    with pytest.raises(TypeError):
        deep_gemm.set_num_sms(1.5)


def test_tc_util_defaults_to_100_and_is_range_checked():
    assert deep_gemm.get_tc_util() == 100
    try:
        deep_gemm.set_tc_util(70)
        assert deep_gemm.get_tc_util() == 70
        deep_gemm.set_tc_util(0)
        assert deep_gemm.get_tc_util() == 100
        with pytest.raises(RuntimeError, match=r"'new_tc_util' must be in \[0, 100\], got 101"):
            deep_gemm.set_tc_util(101)
    finally:
        deep_gemm.set_tc_util(0)


def test_pdl_round_trips_and_needs_a_bool():
    assert deep_gemm.get_pdl() is False
    try:
        deep_gemm.set_pdl(True)
        assert deep_gemm.get_pdl() is True
    finally:
        deep_gemm.set_pdl(False)
    with pytest.raises(TypeError, match="set_pdl: argument 'new_enable_pdl' must be a bool"):
        deep_gemm.set_pdl(1)


def test_inert_jit_knobs_accept_valid_values_and_reject_others():
    assert deep_gemm.set_ignore_compile_dims(True) is None
    deep_gemm.set_ignore_compile_dims(False)
    with pytest.raises(TypeError):
        deep_gemm.set_ignore_compile_dims("yes")
    for value in (1, [8], [8, 16]):
        assert deep_gemm.set_block_size_multiple_of(value) is None
    with pytest.raises(ValueError, match="must hold 1 or 2 ints"):
        deep_gemm.set_block_size_multiple_of([1, 2, 3])
    with pytest.raises(ValueError, match="must be positive"):
        deep_gemm.set_block_size_multiple_of([0])
    deep_gemm.set_block_size_multiple_of(1)


def test_mk_alignment_and_aliases():
    assert deep_gemm.get_mk_alignment_for_contiguous_layout() == 128
    assert deep_gemm.get_m_alignment_for_contiguous_layout is deep_gemm.get_mk_alignment_for_contiguous_layout
    assert deep_gemm.get_k_alignment_for_contiguous_layout is deep_gemm.get_mk_alignment_for_contiguous_layout
    try:
        deep_gemm.set_mk_alignment_for_contiguous_layout(64)
        assert deep_gemm.get_m_alignment_for_contiguous_layout() == 64
    finally:
        deep_gemm.set_mk_alignment_for_contiguous_layout(128)
    with pytest.raises(ValueError, match="must be positive"):
        deep_gemm.set_mk_alignment_for_contiguous_layout(0)


def test_theoretical_mk_alignment_is_what_the_cpu_kernels_need():
    f = deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout
    assert [f(), f(1), f(193), f(expected_m=1000, num_groups=8)] == [1, 1, 1, 1]
    with pytest.raises(ValueError, match="'expected_m' must be >= 0"):
        f(-1)
    with pytest.raises(TypeError, match="'num_groups' must be an int"):
        f(num_groups=1.5)


def test_mega_moe_names_are_exported():
    # Their behaviour is tested in test_mega_moe.py.
    for name in ("SymmBuffer", "get_symm_buffer_for_mega_moe", "transform_weights_for_mega_moe", "fp8_fp4_mega_moe",
                 "bf16_mega_moe"):
        assert callable(getattr(deep_gemm, name))
