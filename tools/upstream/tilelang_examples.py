"""The 18 TileLang examples run_tilelang_examples.py runs, with the arguments and environment each
needs on 2 CPU cores. Sizes are only changed through an example's own command-line flags (never its
assertions); each change says why. ``pass_if`` accepts an example whose checks all passed (the
given line was printed) and that then stopped in a part that is not a check (a benchmark against a
GPU-only library)."""

EXAMPLES = {
    "quickstart": {"path": "examples/quickstart.py"},
    "gemm": {"path": "examples/gemm/example_gemm.py"},
    "elementwise": {"path": "examples/elementwise/example_elementwise_add.py"},
    "rms_norm": {"path": "examples/norm/rms_norm.py"},
    "layernorm": {"path": "examples/norm/layernorm.py"},
    "online_softmax": {"path": "examples/online_softmax/online_softmax.py"},
    "topk": {"path": "examples/topk/example_topk.py"},
    "per_token_cast_fp8": {
        "path": "examples/cast/example_per_token_cast_to_fp8.py",
        # After "All checks pass." the script benchmarks against a Triton kernel; Triton has no CPU backend.
        "pass_if": "All checks pass."},
    "gemv": {"path": "examples/gemv/example_gemv.py"},
    "gemm_fp8": {"path": "examples/gemm_fp8/example_tilelang_gemm_fp8.py"},
    "gemm_splitk": {"path": "examples/gemm_splitk/example_tilelang_gemm_splitk.py"},
    "convolution": {
        "path": "examples/convolution/example_convolution.py",
        # Default N=128 is a 77 GFLOP fp16 convolution (fp16 GEMMs take tessera's scalar path): batch 2.
        "argv": ["--n", "2"]},
    "dynamic_shape": {
        "path": "examples/dynamic_shape/example_dynamic.py",
        # main(M=N=K=16384) is an 8.8 TFLOP fp16 GEMM and has no flags: its defaults become 1024 / 768 / 512.
        "env": {"TESSERA_SHIM_DEFAULTS": '{"main": {"M": 1024, "N": 768, "K": 512}}'}},
    "flash_attention_fwd": {
        "path": "examples/flash_attention/example_mha_fwd_bshd.py",
        # Default 8 x 32 heads x 4096^2 is 1.1 TFLOP in fp16 (scalar GEMM path here): 1 x 4 heads x 512.
        "argv": ["--batch", "1", "--heads", "4", "--seq_len", "512"]},
    "gqa_flash_decoding": {"path": "examples/flash_decoding/example_gqa_decode.py"},
    "fp4_dequant_gemm": {"path": "examples/dequantize_gemm/example_dequant_gemm_fp4_hopper.py"},
    "int4_dequant_gemv": {"path": "examples/dequantize_gemm/example_dequant_gemv_fp16xint4.py"},
    "mhc_pre": {"path": "examples/deepseek_mhc/example_mhc_pre.py"},
}
