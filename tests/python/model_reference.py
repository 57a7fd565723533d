"""A float64 numpy reference of the model docs/model.md defines (DeepSeek-V3.2: MLA over an FP8
latent cache with the sparse-attention indexer, DeepSeekMoE, FP8 block-scaled weights).

It follows every step and every quantisation point the doc lists, in float64 everywhere else, one
sequence at a time with its own caches; the runner's and the eager-torch results are compared to it.
Slow by design (weights are dequantised to float64): meant for tiny configs.
"""
import math

import numpy as np

from tessera.model.config import has_score_correction_bias, load_config, yarn_enabled
from tessera.model.safetensors_io import read_checkpoint_tensors

BLOCK = 128
E4M3_MAX = 448.0


# ---- number formats -------------------------------------------------------------------------------

def round_to_format(x, mantissa_bits: int, min_normal_exp: int):
    """Rounds float64 values to the nearest value with ``mantissa_bits`` stored mantissa bits (ties to
    even), subnormals below 2**min_normal_exp; no range limit (callers saturate)."""
    x = np.asarray(x, dtype=np.float64)
    mag = np.abs(x)
    with np.errstate(divide="ignore"):
        exp = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    exp = np.maximum(exp, min_normal_exp)
    step = np.exp2(exp - mantissa_bits)
    return np.rint(x / step) * step  # np.rint rounds halves to even


def round_e4m3(x):
    """float64 -> nearest e4m3fn value (ties to even), saturating at +-448."""
    return np.clip(round_to_format(x, 3, -6), -E4M3_MAX, E4M3_MAX)


def round_bf16(x):
    """float64 -> nearest bfloat16 value (ties to even)."""
    return round_to_format(x, 7, -126)


def act_scales(amax, scale_fmt):
    """The q8 scale of blocks with the given amax: amax/448 (a power of two rounded up for ue8m0);
    1 for an all-zero block."""
    s = np.asarray(amax, dtype=np.float64) / E4M3_MAX
    if scale_fmt == "ue8m0":
        with np.errstate(divide="ignore"):
            s = np.exp2(np.ceil(np.log2(np.where(s > 0, s, 1.0))))
    return np.where(amax > 0, s, 1.0)


def q8(x, scale_fmt=None):
    """Quantises each consecutive 128 values of the last axis to e4m3. Returns (e4m3 values as
    float64, scales with one entry per block)."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    assert n % BLOCK == 0, n
    blocks = x.reshape(*x.shape[:-1], n // BLOCK, BLOCK)
    s = act_scales(np.abs(blocks).max(axis=-1), scale_fmt)
    q = round_e4m3(blocks / s[..., None])
    return q.reshape(x.shape), s


def q8_dequant(x, scale_fmt=None):
    """dequant(q8(x)): what a Linear with FP8 weights multiplies."""
    q, s = q8(x, scale_fmt)
    n = x.shape[-1]
    return (q.reshape(*q.shape[:-1], n // BLOCK, BLOCK) * s[..., None]).reshape(q.shape)


def quantize_latent_for_cache(latent):
    """FlashMLA's V32 cache: e4m3 with one power-of-two scale per 128 values, the scale being
    max(amax/448, 1e-4) rounded up to a power of two. Returns the dequantised latent."""
    blocks = latent.reshape(*latent.shape[:-1], -1, BLOCK)
    raw = np.maximum(np.abs(blocks).max(axis=-1) / E4M3_MAX, 1e-4)
    s = np.exp2(np.ceil(np.log2(raw)))
    return (round_e4m3(blocks / s[..., None]) * s[..., None]).reshape(latent.shape)


def dequant_weight(weight, scale_inv):
    """e4m3 weight [rows, cols] times its [ceil(rows/128), ceil(cols/128)] block scales, as float64."""
    w = np.asarray(weight, dtype=np.float64)
    s = np.asarray(scale_inv, dtype=np.float64)
    s_full = np.repeat(np.repeat(s, BLOCK, axis=0), BLOCK, axis=1)[: w.shape[0], : w.shape[1]]
    return w * s_full


# ---- building blocks ------------------------------------------------------------------------------

def rms_norm(x, w, eps=1e-6):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps=1e-6):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def rope_frequencies(config):
    """The rotation frequency of each pair (YaRN-blended when max_seq_len > original_seq_len)."""
    dim = config["qk_rope_head_dim"]
    base = config["rope_theta"]
    freqs = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    if yarn_enabled(config):
        orig = config["original_seq_len"]

        def correction_dim(rotations):
            return dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(base))

        low = max(math.floor(correction_dim(config["beta_fast"])), 0)
        high = min(math.ceil(correction_dim(config["beta_slow"])), dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
        smooth = 1.0 - ramp
        freqs = freqs / config["rope_factor"] * (1.0 - smooth) + freqs * smooth
    return freqs


def rotate_interleaved(x, positions, freqs):
    """MLA's rotary embedding: pairs (2i, 2i+1) turn by positions * freqs[i]. x: [T, ..., rope_dim]."""
    angles = np.asarray(positions, dtype=np.float64)[:, None] * freqs[None, :]
    shape = (len(positions),) + (1,) * (x.ndim - 2) + (freqs.size,)
    cos, sin = np.cos(angles).reshape(shape), np.sin(angles).reshape(shape)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out


def rotate_halves(x, positions, freqs):
    """The indexer's rotary embedding: pairs (i, i + rope_dim/2) turn by positions * freqs[i]."""
    angles = np.asarray(positions, dtype=np.float64)[:, None] * freqs[None, :]
    shape = (len(positions),) + (1,) * (x.ndim - 2) + (freqs.size,)
    cos, sin = np.cos(angles).reshape(shape), np.sin(angles).reshape(shape)
    half = freqs.size
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def hadamard(n):
    """The normalised n-point Walsh-Hadamard matrix in Sylvester order (H/sqrt(n), symmetric)."""
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    assert h.shape[0] == n, n
    return h / math.sqrt(n)


def top_indices(values, k):
    """Indices of the k largest values along the last axis of a 1-D array, ties to the lower index."""
    order = np.lexsort((np.arange(values.size), -values))
    return order[:k]


def route(scores, bias, config):
    """MoE routing for one token: ``scores`` are sigmoid (or softmax) gate scores, ``bias`` the score
    correction (or None). Returns (chosen expert indices, their weights)."""
    n_groups, n_limited = config["n_expert_groups"], config["n_limited_groups"]
    choice = scores + bias if bias is not None else scores.copy()
    if n_groups > 1:
        grouped = choice.reshape(n_groups, -1)
        if bias is not None:
            group_scores = np.sort(grouped, axis=-1)[:, -2:].sum(axis=-1)
        else:
            group_scores = grouped.max(axis=-1)
        keep = top_indices(group_scores, n_limited)
        masked = np.full_like(grouped, -np.inf)
        masked[keep] = grouped[keep]
        choice = masked.reshape(-1)
    chosen = top_indices(choice, config["n_activated_experts"])
    weights = scores[chosen]
    if config["score_func"] == "sigmoid":
        weights = weights / weights.sum()
    return chosen, weights * config["route_scale"]


# ---- the model ------------------------------------------------------------------------------------

class ReferenceModel:
    """One sequence through the model of docs/model.md in float64, with its own caches.

    ``prefill(tokens)`` -> (logits [T, vocab], hidden [n_layers, T, dim]: the residual stream after
    each layer); ``decode(token)`` -> (logits [vocab], hidden [n_layers, dim]); ``generate(prompt, n)``
    -> n greedy tokens. Attention always reads the quantised cache, so prefill and decode agree.

    ``bf16_probabilities``: round the attention probabilities to bf16 for ``p . latent`` as tessera's
    bf16 FlashMLA kernels do (avx512bf16 and amx levels: ``p = exp(s - max)`` rounded to bf16, divided
    by the f32 sum of the unrounded ``p``; exact for lists up to one kernel tile, 96 tokens). The FP8
    re-quantisation after attention turns that 2^-9 rounding into ~1% differences, so a comparison with
    those kernels needs it.
    """

    def __init__(self, path, bf16_probabilities=False):
        self.bf16_probabilities = bf16_probabilities
        self.config = load_config(path)
        self.tensors = read_checkpoint_tensors(path)
        self._weights = {}
        c = self.config
        self.fp8 = c["dtype"] == "fp8"
        self.scale_fmt = c["scale_fmt"]
        self.freqs = rope_frequencies(c)
        self.hadamard = hadamard(c["index_head_dim"])
        self.softmax_scale = (c["qk_nope_head_dim"] + c["qk_rope_head_dim"]) ** -0.5
        if yarn_enabled(c):
            m = 0.1 * c["mscale"] * math.log(c["rope_factor"]) + 1.0
            self.softmax_scale *= m * m
        self.reset()

    def reset(self):
        """Empties the caches (a new sequence)."""
        n = self.config["n_layers"]
        self.latent_cache = [np.zeros((0, self.config["kv_lora_rank"])) for _ in range(n)]
        self.rope_cache = [np.zeros((0, self.config["qk_rope_head_dim"])) for _ in range(n)]
        self.index_k_cache = [np.zeros((0, self.config["index_head_dim"])) for _ in range(n)]
        self.index_k_scale = [np.zeros((0,)) for _ in range(n)]
        self.length = 0
        self.last_topk = [None] * n
        self.last_index_scores = [None] * n
        self.forced_topk = None

    def save_state(self):
        """The caches of the current sequence (to interleave several sequences on one model)."""
        return (list(self.latent_cache), list(self.rope_cache), list(self.index_k_cache),
                list(self.index_k_scale), self.length)

    def load_state(self, state):
        (self.latent_cache, self.rope_cache, self.index_k_cache, self.index_k_scale, self.length) = (
            list(state[0]), list(state[1]), list(state[2]), list(state[3]), state[4])

    # -- weights
    def tensor(self, name):
        if name not in self._weights:
            self._weights[name] = np.asarray(self.tensors[name], dtype=np.float64)
        return self._weights[name]

    def weight(self, prefix):
        """The dequantised float64 weight of a "linear" tensor."""
        key = prefix + ".weight"
        if key not in self._weights:
            w = self.tensors[key]
            if self.fp8:
                self._weights[key] = dequant_weight(w, self.tensors[prefix + ".weight_scale_inv"])
            else:
                self._weights[key] = np.asarray(w, dtype=np.float64)
        return self._weights[key]

    def linear(self, x, prefix):
        w = self.weight(prefix)
        # FP8 weights: the input is re-quantised per 128; bf16 weights: the GEMM reads a bf16 input.
        x = q8_dequant(x, self.scale_fmt) if self.fp8 else round_bf16(x)
        return x @ w.T

    # -- layers
    def mlp(self, x, prefix, bf16_outputs=False):
        """down(silu(gate(x)) * up(x)); ``bf16_outputs``: each projection's output rounded to bf16, as the
        grouped GEMMs that run routed experts write them."""
        out = round_bf16 if bf16_outputs else (lambda v: v)
        hidden = silu(out(self.linear(x, prefix + ".gate_proj"))) * out(self.linear(x, prefix + ".up_proj"))
        return out(self.linear(hidden, prefix + ".down_proj"))

    def moe(self, x, prefix):
        c = self.config
        logits = round_bf16(x) @ self.tensor(prefix + ".gate.weight").T
        scores = sigmoid(logits) if c["score_func"] == "sigmoid" else softmax(logits)
        bias = self.tensor(prefix + ".gate.e_score_correction_bias") if has_score_correction_bias(c) else None
        out = self.mlp(x, prefix + ".shared_experts") if c["n_shared_experts"] else np.zeros_like(x)
        # Each routed lane is bf16(weight * expert output); the lanes' sum is rounded to bf16 once (what
        # the expert-parallel combine returns; one rank computes the same).
        routed = np.zeros_like(x)
        for t in range(x.shape[0]):
            chosen, weights = route(scores[t], bias, c)
            for e, w in zip(chosen, weights):
                routed[t] += round_bf16(w * self.mlp(x[t:t + 1], f"{prefix}.experts.{e}", bf16_outputs=True)[0])
        return out + round_bf16(routed)

    def indexer_select(self, layer, x, qr, positions):
        """Per query token, the attended positions (ascending) chosen by the indexer."""
        c = self.config
        p = f"model.layers.{layer}.self_attn.indexer"
        n_heads, head_dim, rope = c["index_n_heads"], c["index_head_dim"], c["qk_rope_head_dim"]
        q = self.linear(qr, p + ".wq_b").reshape(len(positions), n_heads, head_dim)
        q = np.concatenate([rotate_halves(q[..., :rope], positions, self.freqs), q[..., rope:]], axis=-1)
        k = layer_norm(self.linear(x, p + ".wk"), self.tensor(p + ".k_norm.weight"), self.tensor(p + ".k_norm.bias"))
        k = np.concatenate([rotate_halves(k[:, None, :rope], positions, self.freqs)[:, 0], k[:, rope:]], axis=-1)
        q_codes, q_scale = q8(q @ self.hadamard, self.scale_fmt)  # q_scale: [T, heads, 1]
        k_codes, k_scale = q8(k @ self.hadamard, self.scale_fmt)
        self.index_k_cache[layer] = np.concatenate([self.index_k_cache[layer], k_codes])
        self.index_k_scale[layer] = np.concatenate([self.index_k_scale[layer], k_scale[:, 0]])
        w = (round_bf16(x) @ self.tensor(p + ".weights_proj.weight").T) * n_heads ** -0.5 * head_dim ** -0.5 * q_scale[..., 0]
        keys, key_scale = self.index_k_cache[layer], self.index_k_scale[layer]
        selections, self.last_index_scores[layer] = [], []
        for i, pos in enumerate(positions):
            dots = np.maximum(q_codes[i] @ keys[: pos + 1].T, 0.0)  # [heads, pos+1]
            score = (w[i] @ dots) * key_scale[: pos + 1]
            chosen = top_indices(score, min(c["index_topk"], pos + 1))
            selections.append(np.sort(chosen))
            self.last_index_scores[layer].append(score)
        return selections

    def attention(self, layer, x, positions):
        c = self.config
        p = f"model.layers.{layer}.self_attn"
        T, H = len(positions), c["n_heads"]
        nope, rope, vdim, lat = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
        qr = rms_norm(self.linear(x, p + ".q_a_proj"), self.tensor(p + ".q_a_layernorm.weight"))
        q = self.linear(qr, p + ".q_b_proj").reshape(T, H, nope + rope)
        q_nope, q_pe = q[..., :nope], rotate_interleaved(q[..., nope:], positions, self.freqs)
        kv = self.linear(x, p + ".kv_a_proj_with_mqa")
        latent = rms_norm(kv[:, :lat], self.tensor(p + ".kv_a_layernorm.weight"))
        k_pe = rotate_interleaved(kv[:, None, lat:], positions, self.freqs)[:, 0]
        # FlashMLA's cache quantiser reads bf16 rows: the latent is rounded to bf16, then to FP8.
        cached = quantize_latent_for_cache(round_bf16(latent))
        self.latent_cache[layer] = np.concatenate([self.latent_cache[layer], cached])
        self.rope_cache[layer] = np.concatenate([self.rope_cache[layer], round_bf16(k_pe)])
        selections = self.indexer_select(layer, x, qr, positions)
        self.last_topk[layer] = selections
        if self.forced_topk is not None:  # attend where another implementation's indexer chose
            selections = [self.forced_topk[layer][pos] for pos in positions]
        # The absorbed products are bf16 GEMMs (DeepSeek's weight_dequant to bf16, q_nope in bf16), and
        # FlashMLA takes the absorbed query [q_lat, q_pe] in bf16 and returns o_lat in bf16.
        wkv_b = round_bf16(self.weight(p + ".kv_b_proj")).reshape(H, nope + vdim, lat)
        w_uk, w_uv = wkv_b[:, :nope], wkv_b[:, nope:]
        q_lat = round_bf16(np.einsum("thd,hdc->thc", round_bf16(q_nope), w_uk))
        q_pe = round_bf16(q_pe)
        out = np.zeros((T, H, vdim))
        for i, sel in enumerate(selections):
            lat_sel, pe_sel = self.latent_cache[layer][sel], self.rope_cache[layer][sel]
            scores = (q_lat[i] @ lat_sel.T + q_pe[i] @ pe_sel.T) * self.softmax_scale
            if self.bf16_probabilities:
                unnormalised = np.exp(scores - scores.max(axis=-1, keepdims=True))
                o_lat = round_bf16((round_bf16(unnormalised) @ lat_sel) / unnormalised.sum(axis=-1, keepdims=True))
            else:
                o_lat = round_bf16(softmax(scores) @ lat_sel)  # [H, lat]
            out[i] = np.einsum("hc,hdc->hd", o_lat, w_uv)
        return self.linear(out.reshape(T, H * vdim), p + ".o_proj")

    def layer(self, layer, h, positions):
        """One transformer layer on the residual stream h [T, dim] of new tokens at ``positions``
        (appending them to this layer's caches); returns the residual stream after the layer."""
        c = self.config
        p = f"model.layers.{layer}"
        h = h + self.attention(layer, rms_norm(h, self.tensor(p + ".input_layernorm.weight")), positions)
        x = rms_norm(h, self.tensor(p + ".post_attention_layernorm.weight"))
        return h + (self.mlp(x, p + ".mlp") if layer < c["n_dense_layers"] else self.moe(x, p + ".mlp"))

    def head(self, h):
        """Logits of residual-stream rows [T, dim]."""
        return round_bf16(rms_norm(h, self.tensor("model.norm.weight"))) @ self.tensor("lm_head.weight").T

    def embed(self, tokens):
        return self.tensor("model.embed_tokens.weight")[np.asarray(tokens, dtype=np.int64).reshape(-1)]

    def forward(self, tokens):
        """Runs new tokens at the next positions; returns (logits [T, vocab], hidden [n_layers, T, dim])."""
        c = self.config
        tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        positions = np.arange(self.length, self.length + tokens.size)
        if positions[-1] >= c["max_seq_len"]:
            raise ValueError(f"ReferenceModel.forward: sequence longer than max_seq_len={c['max_seq_len']}")
        h = self.embed(tokens)
        hidden = []
        for layer in range(c["n_layers"]):
            h = self.layer(layer, h, positions)
            hidden.append(h)
        self.length += tokens.size
        return self.head(h), np.stack(hidden)

    def teacher_forced(self, tokens, hidden, topk=None):
        """Each layer of a whole sequence run on another implementation's input to it: ``hidden``
        [n_layers, T, dim] is that implementation's residual stream after every layer for ``tokens``;
        ``topk`` [n_layers, T, k] (entries < 0 unused), when given, its indexer's choices, which attention
        then uses (``last_topk`` keeps the reference's own, ``last_index_scores`` their scores).
        Returns (the reference's output of every layer [n_layers, T, dim], the logits of the last
        layer's reference output [T, vocab]). A comparison layer by layer keeps a difference from
        growing through the following layers (FP8 re-quantisation amplifies small ones)."""
        self.reset()
        tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        positions = np.arange(tokens.size)
        if topk is not None:
            self.forced_topk = [[np.sort(row[row >= 0]) for row in np.asarray(t)] for t in topk]
        inputs = [self.embed(tokens)] + [np.asarray(hidden[i], dtype=np.float64) for i in range(len(hidden) - 1)]
        outputs = np.stack([self.layer(layer, h, positions) for layer, h in enumerate(inputs)])
        self.length, self.forced_topk = tokens.size, None
        return outputs, self.head(outputs[-1])

    def prefill(self, tokens):
        """Starts a new sequence with ``tokens``."""
        self.reset()
        return self.forward(tokens)

    def decode(self, token):
        """One more token; returns (logits [vocab], hidden [n_layers, dim])."""
        logits, hidden = self.forward([int(token)])
        return logits[0], hidden[:, 0]

    def generate(self, prompt, n):
        """n greedy tokens after ``prompt`` (argmax, lowest index on ties); also sets ``self.margins``,
        the top-1 minus top-2 logit of each step (how safe each greedy choice is)."""
        logits, _ = self.prefill(prompt)
        step_logits = logits[-1]
        tokens, self.margins = [], []
        for i in range(n):
            top2 = np.sort(step_logits)[-2:]
            self.margins.append(float(top2[1] - top2[0]))
            tokens.append(int(np.argmax(step_logits)))
            if i + 1 < n:
                step_logits, _ = self.decode(tokens[-1])
        return tokens
