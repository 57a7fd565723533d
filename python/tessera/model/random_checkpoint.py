"""Random DeepSeek-V3.2 checkpoints in the layout of docs/model.md, for tests and benchmarks.

Weights are about N(0, 1/fan_in) so activations stay O(1) through many layers; norm weights are near 1;
FP8 weights are e4m3 codes with per-128x128-block scales that vary by up to 2x between blocks. Data is
generated and written in chunks (a random byte picks one of 256 precomputed codes), so a real-shape
MoE layer (~11 GB) streams to disk without being held in memory.

    python -m tessera.model.random_checkpoint --config cfg.json --out DIR [--seed S] [--files N]
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import time
import zlib

import ml_dtypes
import numpy as np

from .._errors import invalid_argument
from .config import has_score_correction_bias, load_config, validate_config
from .safetensors_io import SafetensorsWriter, read_header, tensor_nbytes

BLOCK = 128
_CHUNK_BYTES = 16 << 20
# The e4m3 codes have this standard deviation; each block scale maps it to 1/sqrt(fan_in).
_CODE_STD = 16.0


def linear_shapes(config: dict) -> list:
    """(name prefix, rows, cols) of every "linear" weight, in checkpoint order."""
    c = config
    out = []
    for layer in range(c["n_layers"]):
        p = f"model.layers.{layer}."
        a = p + "self_attn."
        out += [(a + "q_a_proj", c["q_lora_rank"], c["dim"]),
                (a + "q_b_proj", c["n_heads"] * (c["qk_nope_head_dim"] + c["qk_rope_head_dim"]), c["q_lora_rank"]),
                (a + "kv_a_proj_with_mqa", c["kv_lora_rank"] + c["qk_rope_head_dim"], c["dim"]),
                (a + "kv_b_proj", c["n_heads"] * (c["qk_nope_head_dim"] + c["v_head_dim"]), c["kv_lora_rank"]),
                (a + "o_proj", c["dim"], c["n_heads"] * c["v_head_dim"]),
                (a + "indexer.wq_b", c["index_n_heads"] * c["index_head_dim"], c["q_lora_rank"]),
                (a + "indexer.wk", c["index_head_dim"], c["dim"])]
        if layer < c["n_dense_layers"]:
            out += _mlp_shapes(p + "mlp.", c["dim"], c["inter_dim"])
        else:
            for e in range(c["n_routed_experts"]):
                out += _mlp_shapes(p + f"mlp.experts.{e}.", c["dim"], c["moe_inter_dim"])
            if c["n_shared_experts"]:
                out += _mlp_shapes(p + "mlp.shared_experts.", c["dim"], c["n_shared_experts"] * c["moe_inter_dim"])
    return out


def _mlp_shapes(prefix, dim, inter):
    return [(prefix + "gate_proj", inter, dim), (prefix + "up_proj", inter, dim), (prefix + "down_proj", dim, inter)]


def checkpoint_entries(config: dict) -> list:
    """Every tensor of docs/model.md's table for this config: (name, dtype, shape, kind, fan_in), where
    kind says how its values are drawn."""
    c = config
    fp8 = c["dtype"] == "fp8"
    entries = [("model.embed_tokens.weight", "BF16", (c["vocab_size"], c["dim"]), "normal", 1)]
    linears = {name: (rows, cols) for name, rows, cols in linear_shapes(c)}

    def linear(name):
        rows, cols = linears[name]
        if fp8:
            return [(name + ".weight", "F8_E4M3", (rows, cols), "codes", cols),
                    (name + ".weight_scale_inv", "F32", (-(-rows // BLOCK), -(-cols // BLOCK)), "scales", cols)]
        return [(name + ".weight", "BF16", (rows, cols), "normal", cols)]

    for layer in range(c["n_layers"]):
        p = f"model.layers.{layer}."
        a = p + "self_attn."
        entries.append((p + "input_layernorm.weight", "BF16", (c["dim"],), "norm", 0))
        entries += linear(a + "q_a_proj")
        entries.append((a + "q_a_layernorm.weight", "BF16", (c["q_lora_rank"],), "norm", 0))
        entries += linear(a + "q_b_proj") + linear(a + "kv_a_proj_with_mqa")
        entries.append((a + "kv_a_layernorm.weight", "BF16", (c["kv_lora_rank"],), "norm", 0))
        entries += linear(a + "kv_b_proj") + linear(a + "o_proj")
        entries += linear(a + "indexer.wq_b") + linear(a + "indexer.wk")
        # DeepSeek keeps the indexer's LayerNorm in f32; the other norms stay bf16 (both are allowed).
        entries.append((a + "indexer.k_norm.weight", "F32", (c["index_head_dim"],), "norm", 0))
        entries.append((a + "indexer.k_norm.bias", "F32", (c["index_head_dim"],), "bias", 0))
        entries.append((a + "indexer.weights_proj.weight", "BF16", (c["index_n_heads"], c["dim"]), "normal", c["dim"]))
        entries.append((p + "post_attention_layernorm.weight", "BF16", (c["dim"],), "norm", 0))
        if layer < c["n_dense_layers"]:
            for proj in ("gate_proj", "up_proj", "down_proj"):
                entries += linear(p + f"mlp.{proj}")
        else:
            entries.append((p + "mlp.gate.weight", "BF16", (c["n_routed_experts"], c["dim"]), "normal", c["dim"]))
            if has_score_correction_bias(c):
                entries.append((p + "mlp.gate.e_score_correction_bias", "F32", (c["n_routed_experts"],), "bias", 0))
            for e in range(c["n_routed_experts"]):
                for proj in ("gate_proj", "up_proj", "down_proj"):
                    entries += linear(p + f"mlp.experts.{e}.{proj}")
            for proj in ("gate_proj", "up_proj", "down_proj") if c["n_shared_experts"] else ():
                entries += linear(p + f"mlp.shared_experts.{proj}")
    entries.append(("model.norm.weight", "BF16", (c["dim"],), "norm", 0))
    entries.append(("lm_head.weight", "BF16", (c["vocab_size"], c["dim"]), "normal", c["dim"]))
    return entries


def _normal_quantiles(n: int) -> np.ndarray:
    """n equally likely values of a standard normal (the midpoints of n quantile bins)."""
    dist = statistics.NormalDist()
    return np.array([dist.inv_cdf((i + 0.5) / n) for i in range(n)], dtype=np.float64)


_CODE_TABLE = np.clip(_normal_quantiles(256) * _CODE_STD, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
_NORMAL_TABLE = _normal_quantiles(1 << 16)
# Two codes per lookup: entry i holds the codes of the two bytes of the 16-bit value i (in memory
# order), so looking up draws viewed as 16-bit values gives the bytes of _CODE_TABLE[draws] at about
# twice the rate (numpy's indexing costs per index, and the codes are 11 of a real-shape slice's 16 GB).
_CODE_PAIRS = _CODE_TABLE[np.arange(1 << 16, dtype=np.uint16).view(np.uint8).reshape(-1, 2)].view(np.uint16).ravel()


def _codes_of(draws: np.ndarray) -> np.ndarray:
    """_CODE_TABLE[draws] for uint8 draws."""
    if draws.size % 2 == 0:
        return _CODE_PAIRS[draws.view(np.uint16)].view(np.uint8)
    return np.concatenate([_codes_of(draws[:-1]), _CODE_TABLE[draws[-1:]]])


def _rng(seed: int, name: str) -> np.random.Generator:
    # One stream per tensor name: the values do not depend on how tensors are spread over files.
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _chunks(kind, dtype, shape, fan_in, rng, scale_fmt):
    """Yields the tensor's values in row chunks of about _CHUNK_BYTES."""
    rows = shape[0]
    row_bytes = max(1, tensor_nbytes(dtype, shape[1:]))
    step = max(1, _CHUNK_BYTES // row_bytes)
    cols = int(np.prod(shape[1:], dtype=np.int64))
    np_dtype = {"BF16": ml_dtypes.bfloat16, "F32": np.float32}.get(dtype)
    if kind == "codes":
        for r in range(0, rows, step):
            n = min(step, rows - r) * cols
            yield _codes_of(rng.integers(0, 256, size=n, dtype=np.uint8))
    elif kind == "normal":
        table = (_NORMAL_TABLE / np.sqrt(fan_in)).astype(np_dtype)
        for r in range(0, rows, step):
            n = min(step, rows - r) * cols
            yield table[rng.integers(0, 1 << 16, size=n, dtype=np.uint16)]
    elif kind == "scales":
        # Block scale s turns codes of std _CODE_STD into std 1/sqrt(fan_in), times a per-block factor
        # in [0.7, 1.4] (for ue8m0 checkpoints: a power of two in [0.35, 1.41] * base) so block-scale handling is exercised.
        base = 1.0 / (_CODE_STD * np.sqrt(fan_in))
        if scale_fmt == "ue8m0":
            exps = np.round(np.log2(base)) + rng.integers(-1, 1, size=shape, endpoint=False)
            yield np.exp2(exps).astype(np.float32)
        else:
            yield (base * np.exp2(rng.uniform(-0.5, 0.5, size=shape))).astype(np.float32)
    elif kind == "norm":
        yield (1.0 + 0.1 * rng.standard_normal(shape)).astype(np_dtype)
    elif kind == "bias":
        yield (0.02 * rng.standard_normal(shape)).astype(np_dtype)
    else:
        raise AssertionError(kind)


def _made_ahead(chunks):
    """Yields what ``chunks`` yields, each item made by a second thread while the caller uses the one
    before: making the values holds the interpreter, writing them to the file does not, so they overlap."""
    end = object()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(next, chunks, end)
        while (item := pending.result()) is not end:
            pending = pool.submit(next, chunks, end)
            yield item


def _all_chunks(group, seed, scale_fmt):
    for tname, dtype, shape, kind, fan_in in group:
        yield from _chunks(kind, dtype, shape, fan_in, _rng(seed, tname), scale_fmt)


def _split(entries, num_files):
    """Contiguous groups of entries with about equal bytes each (a weight and its scale stay together)."""
    total = sum(tensor_nbytes(e[1], e[2]) for e in entries)
    groups, current, done = [], [], 0
    for i, e in enumerate(entries):
        current.append(e)
        done += tensor_nbytes(e[1], e[2])
        is_weight_before_scale = i + 1 < len(entries) and entries[i + 1][3] == "scales"
        if (len(groups) < num_files - 1 and done >= total * (len(groups) + 1) / num_files
                and not is_weight_before_scale):
            groups.append(current)
            current = []
    groups.append(current)
    return [g for g in groups if g]


def write_random_checkpoint(config: dict, out_dir, seed: int = 0, num_files: int = 1, progress=None,
                            overwrite: bool = False) -> list:
    """Writes ``config.json`` and ``num_files`` safetensors files holding every tensor of docs/model.md.
    A folder that already holds ``*.safetensors`` files is refused unless ``overwrite`` (which deletes
    them: a checkpoint's tensors may sit in any of its files, so stale ones would mix in).
    ``progress``: None prints to stderr for writes over 1 GB; True/False forces it on/off.
    Returns the paths of the safetensors files."""
    fn = "tessera.model.write_random_checkpoint"
    config = validate_config(config)
    if isinstance(num_files, bool) or not isinstance(num_files, int) or num_files < 1:
        raise invalid_argument(fn, "num_files", f"must be an integer >= 1, got {num_files!r}")
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    stale = sorted(n for n in os.listdir(out_dir) if n.endswith(".safetensors"))
    if stale and not overwrite:
        raise invalid_argument(fn, "out_dir", f"must not hold *.safetensors files already ({out_dir} has {stale[0]}); "
                                              "pass overwrite=True (--overwrite) to replace them")
    for n in stale:
        os.remove(os.path.join(out_dir, n))
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    entries = checkpoint_entries(config)
    total = sum(tensor_nbytes(e[1], e[2]) for e in entries)
    show = total > (1 << 30) if progress is None else bool(progress)
    groups = _split(entries, num_files)
    paths, written, start, last_print = [], 0, time.monotonic(), 0.0
    for index, group in enumerate(groups):
        name = "model.safetensors" if len(groups) == 1 else f"model-{index + 1:05d}-of-{len(groups):05d}.safetensors"
        path = os.path.join(out_dir, name)
        with SafetensorsWriter(path, [(e[0], e[1], e[2]) for e in group]) as w:
            for chunk in _made_ahead(_all_chunks(group, seed, config["scale_fmt"])):
                w.write(chunk)
                written += chunk.nbytes
                now = time.monotonic()
                if show and now - last_print > 2.0:
                    last_print = now
                    rate = written / max(now - start, 1e-9) / 1e6
                    print(f"random_checkpoint: {written / 1e9:.2f} / {total / 1e9:.2f} GB ({rate:.0f} MB/s)",
                          file=sys.stderr, flush=True)
        paths.append(path)
    if show:
        print(f"random_checkpoint: wrote {total / 1e9:.2f} GB in {len(paths)} file(s) to {out_dir} "
              f"in {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)
    return paths


def checkpoint_is_current(config: dict, out_dir) -> bool:
    """True when ``out_dir`` already holds this config's checkpoint: the same config.json values and
    safetensors files whose headers list exactly the tensors (names, dtypes, shapes) it needs, with all
    their data present. Values are not compared (a seed change is not detected)."""
    config = validate_config(config)
    try:
        if load_config(os.path.join(os.fspath(out_dir), "config.json")) != config:
            return False
        found = {}
        for name in sorted(os.listdir(out_dir)):
            if name.endswith(".safetensors"):
                header, _ = read_header(os.path.join(out_dir, name))
                found.update({k: (v["dtype"], tuple(v["shape"])) for k, v in header.items()})
    except (OSError, ValueError):
        return False
    return found == {e[0]: (e[1], tuple(e[2])) for e in checkpoint_entries(config)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tessera.model.random_checkpoint",
                                     description="Write a random DeepSeek-V3.2 checkpoint (docs/model.md).")
    parser.add_argument("--config", required=True, help="config JSON (a file, or a name in tessera/model/configs)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--files", type=int, default=1, help="number of safetensors files")
    parser.add_argument("--overwrite", action="store_true", help="replace *.safetensors files already in --out")
    parser.add_argument("--reuse", action="store_true",
                        help="do nothing when --out already holds this config's complete checkpoint, else write it "
                             "(replacing what is there)")
    args = parser.parse_args(argv)
    source = args.config
    if not os.path.exists(source):
        bundled = os.path.join(os.path.dirname(__file__), "configs", source if source.endswith(".json") else source + ".json")
        if os.path.exists(bundled):
            source = bundled
    config = load_config(source)
    if args.reuse and checkpoint_is_current(config, args.out):
        print(f"random_checkpoint: {args.out} already holds this checkpoint", file=sys.stderr, flush=True)
        return 0
    write_random_checkpoint(config, args.out, seed=args.seed, num_files=args.files,
                            overwrite=args.overwrite or args.reuse)
    return 0


if __name__ == "__main__":
    sys.exit(main())
