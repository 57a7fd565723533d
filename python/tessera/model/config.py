"""The model config of docs/model.md: DeepSeek's inference-config keys, their defaults and the rules a
config must follow (unknown keys and out-of-range values are errors naming the key)."""
import json
import os

from .._errors import ArgumentTypeError, invalid_argument

_FN = "tessera.model.load_config"

# key -> (default, kind); kind is "int", "float", or a tuple of allowed values.
DEFAULTS = {
    "max_batch_size": (8, "int"),
    "max_seq_len": (16384, "int"),
    "dtype": ("bf16", ("bf16", "fp8")),
    "scale_fmt": (None, (None, "ue8m0")),
    "vocab_size": (102400, "int"),
    "dim": (2048, "int"),
    "inter_dim": (10944, "int"),
    "moe_inter_dim": (1408, "int"),
    "n_layers": (27, "int"),
    "n_dense_layers": (1, "int"),
    "n_heads": (16, "int"),
    "n_routed_experts": (64, "int"),
    "n_shared_experts": (2, "int"),
    "n_activated_experts": (6, "int"),
    "n_expert_groups": (1, "int"),
    "n_limited_groups": (1, "int"),
    "score_func": ("softmax", ("softmax", "sigmoid")),
    "route_scale": (1.0, "float"),
    "q_lora_rank": (0, "int"),
    "kv_lora_rank": (512, "int"),
    "qk_nope_head_dim": (128, "int"),
    "qk_rope_head_dim": (64, "int"),
    "v_head_dim": (128, "int"),
    "original_seq_len": (4096, "int"),
    "rope_theta": (10000.0, "float"),
    "rope_factor": (40.0, "float"),
    "beta_fast": (32, "float"),
    "beta_slow": (1, "float"),
    "mscale": (1.0, "float"),
    "index_n_heads": (64, "int"),
    "index_head_dim": (128, "int"),
    "index_topk": (2048, "int"),
}

# Sizes tessera's kernels fix (FlashMLA's V32 cache layout, the indexer's 128-point Hadamard).
_FIXED = {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_head_dim": 128}

# Keys that must be at least 1 (the others have their own rules below).
_POSITIVE = ("max_batch_size", "max_seq_len", "vocab_size", "dim", "inter_dim", "moe_inter_dim",
             "n_layers", "n_heads", "n_routed_experts", "n_activated_experts",
             "n_expert_groups", "n_limited_groups", "q_lora_rank", "qk_nope_head_dim", "v_head_dim",
             "original_seq_len", "index_n_heads", "index_topk")
# Upper limits of tessera's kernels: the MQA-logits kernel's heads, DeepSelect's top-k, int32 positions.
_AT_MOST = {"index_n_heads": 128, "index_topk": 4096, "max_seq_len": (1 << 31) - 1}


def _bad(key, rule):
    return invalid_argument(_FN, key, rule)


def _check_type(key, value, kind):
    if isinstance(kind, tuple):
        if value not in kind:
            raise _bad(key, f"must be one of {list(kind)}, got {value!r}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ArgumentTypeError(f"{_FN}: argument '{key}' must be an integer, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"{_FN}: argument '{key}' must be a number, got {value!r}")
    return float(value)


def _check_ranges(c):
    for key in _POSITIVE:
        if c[key] < 1:
            raise _bad(key, f"must be >= 1, got {c[key]}")
    for key, value in _AT_MOST.items():
        if c[key] > value:
            raise _bad(key, f"must be <= {value} (a limit of tessera's kernels), got {c[key]}")
    if c["n_shared_experts"] < 0:
        raise _bad("n_shared_experts", f"must be >= 0, got {c['n_shared_experts']}")
    for key, value in _FIXED.items():
        if c[key] != value:
            raise _bad(key, f"must be {value} (fixed by tessera's kernels), got {c[key]}")
    for key in ("rope_theta", "rope_factor", "beta_fast", "beta_slow"):
        if not c[key] > 0:
            raise _bad(key, f"must be > 0, got {c[key]}")
    if not c["mscale"] >= 0:
        raise _bad("mscale", f"must be >= 0, got {c['mscale']}")
    if not c["route_scale"] > 0:
        raise _bad("route_scale", f"must be > 0, got {c['route_scale']}")
    # FP8 block scales cover 128x128 weight blocks: every weight edge is a whole number of blocks.
    for key in ("dim", "inter_dim", "moe_inter_dim", "q_lora_rank"):
        if c[key] % 128:
            raise _bad(key, f"must be a multiple of 128, got {c[key]}")
    products = {
        "n_heads*(qk_nope_head_dim+qk_rope_head_dim)": c["n_heads"] * (c["qk_nope_head_dim"] + c["qk_rope_head_dim"]),
        "n_heads*(qk_nope_head_dim+v_head_dim)": c["n_heads"] * (c["qk_nope_head_dim"] + c["v_head_dim"]),
        "n_heads*v_head_dim": c["n_heads"] * c["v_head_dim"],
    }
    for name, value in products.items():
        if value % 128:
            raise _bad("n_heads", f"must make {name} a multiple of 128, got {value}")
    if c["n_dense_layers"] < 0 or c["n_dense_layers"] > c["n_layers"]:
        raise _bad("n_dense_layers", f"must be in [0, n_layers={c['n_layers']}], got {c['n_dense_layers']}")
    if c["n_routed_experts"] % c["n_expert_groups"]:
        raise _bad("n_expert_groups", f"must divide n_routed_experts={c['n_routed_experts']}, "
                                      f"got {c['n_expert_groups']}")
    if c["n_limited_groups"] > c["n_expert_groups"]:
        raise _bad("n_limited_groups", f"must be <= n_expert_groups={c['n_expert_groups']}, "
                                       f"got {c['n_limited_groups']}")
    per_group = c["n_routed_experts"] // c["n_expert_groups"]
    reachable = c["n_limited_groups"] * per_group
    if c["n_activated_experts"] > reachable:
        raise _bad("n_activated_experts", f"must be <= n_limited_groups * experts per group = {reachable}, "
                                          f"got {c['n_activated_experts']}")
    # With a correction bias (dim 7168) a group scores its top-2 experts, so a group needs two.
    if has_score_correction_bias(c) and c["n_expert_groups"] > 1 and per_group < 2:
        raise _bad("n_expert_groups", f"must leave >= 2 experts per group when dim = 7168, got {per_group}")


def has_score_correction_bias(config: dict) -> bool:
    """Whether MoE gates carry ``e_score_correction_bias`` (DeepSeek's code: only when dim = 7168)."""
    return config["dim"] == 7168


def validate_config(config: dict) -> dict:
    """Returns a full config (defaults filled in) after checking every rule of docs/model.md;
    raises InvalidArgumentError (or ArgumentTypeError) naming the offending key."""
    if not isinstance(config, dict):
        raise ArgumentTypeError(f"{_FN}: argument 'config' must be a JSON object, got {type(config).__name__}")
    for key in config:
        if key not in DEFAULTS:
            raise _bad(key, "is not a config key (docs/model.md lists the keys)")
    full = {}
    for key, (default, kind) in DEFAULTS.items():
        full[key] = _check_type(key, config.get(key, default), kind) if key in config else default
    _check_ranges(full)
    return full


def load_config(source) -> dict:
    """Loads a config from a dict, a JSON file, or a checkpoint folder holding ``config.json``."""
    if isinstance(source, dict):
        return validate_config(source)
    path = os.fspath(source)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise invalid_argument(_FN, "source", f"must name a readable config file: {e}") from None
    except json.JSONDecodeError as e:
        raise invalid_argument(_FN, "source", f"must hold valid JSON ({path}): {e}") from None
    return validate_config(data)


def yarn_enabled(config: dict) -> bool:
    """YaRN frequency scaling (and the larger softmax scale) apply when max_seq_len > original_seq_len."""
    return config["max_seq_len"] > config["original_seq_len"]
