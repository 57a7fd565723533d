"""Wrong Python types and degenerate sizes at the public entries raise tessera's named errors (naming
the function and the argument), never a bare TypeError/AttributeError/ValueError from inside numpy."""
import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera import deep_gemm, deep_select, flash_mla
from tessera.deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp4, per_token_cast_to_fp8


def expect_named(call, pattern, also=TypeError):
    with pytest.raises(tessera.InvalidArgumentError, match=pattern) as err:
        call()
    assert isinstance(err.value, also)


def test_argument_type_errors_are_named_and_still_type_errors():
    assert issubclass(tessera.ArgumentTypeError, tessera.InvalidArgumentError)
    assert issubclass(tessera.ArgumentTypeError, TypeError)
    expect_named(lambda: per_token_cast_to_fp8(None, use_ue8m0=False),
                 r"per_token_cast_to_fp8: argument 'x' must be a numpy array or a torch CPU tensor, got NoneType")
    expect_named(lambda: deep_gemm.bf16_gemm_nt([[1.0]], [[1.0]], np.zeros((1, 1), np.float32)),
                 r"bf16_gemm_nt: argument 'a' must be a numpy array")
    expect_named(lambda: flash_mla.get_mla_metadata([1, 2], 1, 1), r"get_mla_metadata: argument 'cache_seqlens'")
    x = np.random.default_rng(0).random((2, 100), dtype=np.float32)
    expect_named(lambda: deep_select.topk(x, 4, output_idx=[[0] * 4] * 2), r"topk: argument 'output_idx' must be a numpy")
    q = np.zeros((2, 4, 576), ml_dtypes.bfloat16)
    kv = np.zeros((16, 1, 576), ml_dtypes.bfloat16)
    idx = np.zeros((2, 1, 64), np.int32)
    expect_named(lambda: flash_mla.flash_mla_sparse_fwd(q, kv, idx, None),
                 r"flash_mla_sparse_fwd: argument 'sm_scale' must be a float, got NoneType")


@pytest.mark.parametrize("cast", [per_token_cast_to_fp8, per_block_cast_to_fp8, per_token_cast_to_fp4])
def test_casts_accept_zero_rows(cast):
    q, sf = cast(np.zeros((0, 256), ml_dtypes.bfloat16), use_ue8m0=True)
    assert q.shape[0] == 0 and sf.shape[0] == 0
