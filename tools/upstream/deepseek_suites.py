"""Per-suite settings for run_deepseek_suites.py: which upstream test files run, how their shapes are
shrunk for 2 CPU cores, which per-case functions are counted (and sampled), and what is left out and why.

factor / threshold: see shim/reduce.py (integer literals >= threshold in tuple/list displays are
divided by factor). cases: {function: {every: run 1 in N calls, limit: at most this many runs,
overrides: arguments replaced for out-of-scope parts}}.
"""

DEEP_GEMM = {
    "detect": "deep_gemm/__init__.py",
    "files": {
        # DG_MQA_NUM_CASES: the suite's own knob to sample its MQA cases.
        "tests/test_attention.py": {"factor": 16, "threshold": 1024, "env": {"DG_MQA_NUM_CASES": "24"}},
        "tests/test_bf16.py": {"factor": 16, "threshold": 1024},
        "tests/test_einsum.py": {"factor": 16, "threshold": 1024},
        "tests/test_fp8_fp4.py": {"factor": 16, "threshold": 1024},
        "tests/test_hyperconnection.py": {"factor": 16, "threshold": 1024},
        "tests/test_layout.py": {"factor": 16, "threshold": 1024},
        "tests/test_lazy_init.py": {"argv": ["--num-processes", "2"]},
        "tests/test_legacy.py": {"factor": 16, "threshold": 1024},
        # One rank in this process (--local-rank-idx 0): torch.multiprocessing.spawn's children would not get
        # the shim, and several tessera ranks need mpirun. Shapes via the file's own flags. Its correctness
        # check compares against DeepEP + TileLang ops and is skipped when they do not load (they do not here).
        "tests/test_mega_moe.py": {"argv": ["--local-rank-idx", "0", "--num-processes", "1",
                                            "--num-max-tokens-per-rank", "128", "--hidden", "512",
                                            "--intermediate-hidden", "256", "--num-experts", "16", "--num-topk", "4",
                                            "--masked-ratio", "0.1"]},
    },
    "excluded": {
        "tests/test_sanitizer.py": "runs CUDA's compute-sanitizer on GPU kernels (out of scope by the brief)",
        "tests/generators.py": "helper module, not a test",
    },
}

FLASH_MLA = {
    "detect": "flash_mla/flash_mla_interface.py",
    "files": {
        # Dense decoding asserts an SM90 device (FlashMLA ships it for Hopper only): report arch 9.0.
        "tests/test_flash_mla_dense_decoding.py": {
            "factor": 8, "threshold": 1024, "env": {"TESSERA_SHIM_ARCH": "9.0"},
            "cases": {"test_flash_mla": {"every": 37, "limit": 64}}},
        "tests/test_flash_mla_sparse_decoding.py": {
            "factor": 8, "threshold": 1024, "cases": {"test_flash_mla": {"every": 61, "limit": 8}}},
        "tests/test_flash_mla_sparse_prefill.py": {
            "factor": 8, "threshold": 1024, "cases": {"run_test": {"every": 9, "limit": 24}}},
        "tests/test_fmha_sm100.py": {
            "factor": 16, "threshold": 1024},
    },
    "excluded": {},
}

DEEP_SELECT = {
    "detect": "tests/test_interface_validation.py",
    "files": {
        "tests/test.py": {"factor": 64, "threshold": 1024,
                          "cases": {"run_testcase": {"every": 997, "limit": 60}}},
        "tests/test_interface_validation.py": {"kind": "unittest"},
        "tests/test_topk_validation_host.py": {
            "kind": "unittest", "file_aliases": {"deep_select/interface.py": "tessera.deep_select.interface"}},
        "tests/test_memory_boundaries.py": {"kind": "unittest"},
        "tests/test_index_offsets.py": {"kind": "unittest"},
        "tests/test_devices.py": {"kind": "unittest"},
    },
    "excluded": {},
}

SUITES = {"deep_gemm": DEEP_GEMM, "flash_mla": FLASH_MLA, "deep_select": DEEP_SELECT}
