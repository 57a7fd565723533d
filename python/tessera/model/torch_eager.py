"""The model of docs/model.md in eager PyTorch on the CPU, written the way a user would follow
DeepSeek's inference code: weights dequantised to bf16 once at load, ``F.linear`` in bf16 (f32 for the
gate and the head), a loop over the chosen experts, dense attention with the indexer's mask (MHA in
prefill, absorbed MLA in decode) and bf16 caches. It is the performance peer of ``tessera run``
(``tessera bench model`` compares tokens/s of both); its numerics are close to, not equal to, the model's.

    model = TorchEagerModel("ckpt/")
    completions = model.generate([[1, 2, 3], [4, 5]], max_new_tokens=8)
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

from .config import has_score_correction_bias, load_config, yarn_enabled
from .safetensors_io import read_checkpoint_tensors

BLOCK = 128


def _to_torch(array):
    """numpy (ml_dtypes bf16 / e4m3 included) -> torch tensor without a float32 detour."""
    name = str(array.dtype)
    if name == "bfloat16":
        return torch.from_numpy(np.array(array).view(np.int16)).view(torch.bfloat16)
    if name == "float8_e4m3fn":
        return torch.from_numpy(np.array(array).view(np.uint8)).view(torch.float8_e4m3fn)
    return torch.from_numpy(np.array(array))


def _dequant(weight, scale_inv):
    rows, cols = weight.shape
    s = scale_inv.repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)[:rows, :cols]
    return (weight.float() * s).to(torch.bfloat16)


def _rms_norm(x, w, eps=1e-6):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * w).to(torch.bfloat16)


def _act_quant(x, scale_fmt):
    """FP8 quantisation per 128 values (DeepSeek's act_quant): returns (e4m3 values as f32, scales)."""
    blocks = x.float().unflatten(-1, (-1, BLOCK))
    amax = blocks.abs().amax(-1, keepdim=True)
    s = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
    if scale_fmt == "ue8m0":
        s = torch.exp2(torch.ceil(torch.log2(s)))
    q = (blocks / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).float()
    return q.flatten(-2), s.squeeze(-1)


def _rope_frequencies(c):
    dim, base = c["qk_rope_head_dim"], c["rope_theta"]
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    if yarn_enabled(c):
        orig = c["original_seq_len"]

        def correction_dim(rotations):
            return dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(base))

        low = max(math.floor(correction_dim(c["beta_fast"])), 0)
        high = min(math.ceil(correction_dim(c["beta_slow"])), dim - 1)
        ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / max(high - low, 0.001)).clamp(0, 1)
        freqs = freqs / c["rope_factor"] * ramp + freqs * (1 - ramp)
    angles = torch.outer(torch.arange(c["max_seq_len"], dtype=torch.float32), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def _rope_interleaved(x, freqs):
    """x [B, S, H, d], pairs (2i, 2i+1); freqs [S, d/2]."""
    z = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))
    return torch.view_as_real(z * freqs[None, :, None]).flatten(-2).to(x.dtype)


def _rope_halves(x, freqs):
    """x [B, S, H, d], pairs (i, i + d/2)."""
    half = x.shape[-1] // 2
    z = torch.complex(x[..., :half].float(), x[..., half:].float()) * freqs[None, :, None]
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def _hadamard(n):
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / math.sqrt(n)


class TorchEagerModel:
    """A checkpoint folder run by eager PyTorch; ``generate(prompts, max_new_tokens)`` is greedy."""

    def __init__(self, path, max_batch_size=None, num_threads=None):
        if num_threads:
            torch.set_num_threads(int(num_threads))
        self.config = c = load_config(path)
        self.batch_capacity = max_batch_size or c["max_batch_size"]
        raw = read_checkpoint_tensors(path)
        fp8 = c["dtype"] == "fp8"
        self.w = {}
        for name, array in raw.items():
            if name.endswith(".weight_scale_inv"):
                continue
            t = _to_torch(array)
            if fp8 and t.dtype == torch.float8_e4m3fn:
                t = _dequant(t, _to_torch(raw[name[: -len(".weight")] + ".weight_scale_inv"]))
            elif "norm" in name or name.endswith("e_score_correction_bias") or name.endswith("mlp.gate.weight"):
                t = t.float()
            elif name == "lm_head.weight":
                t = t.float()
            else:
                t = t.to(torch.bfloat16)
            self.w[name] = t
        self.freqs = _rope_frequencies(c)
        self.hadamard = _hadamard(c["index_head_dim"]).to(torch.bfloat16)
        self.softmax_scale = (c["qk_nope_head_dim"] + c["qk_rope_head_dim"]) ** -0.5
        if yarn_enabled(c):
            m = 0.1 * c["mscale"] * math.log(c["rope_factor"]) + 1.0
            self.softmax_scale *= m * m
        self._allocate_caches(self.batch_capacity)

    def _allocate_caches(self, batch):
        c = self.config
        shape = (batch, c["max_seq_len"])
        n = c["n_layers"]
        self.kv_cache = [torch.zeros(*shape, c["kv_lora_rank"], dtype=torch.bfloat16) for _ in range(n)]
        self.pe_cache = [torch.zeros(*shape, c["qk_rope_head_dim"], dtype=torch.bfloat16) for _ in range(n)]
        self.k_cache = [torch.zeros(*shape, c["index_head_dim"]) for _ in range(n)]
        self.k_scale_cache = [torch.zeros(*shape) for _ in range(n)]

    def _linear(self, x, name):
        return F.linear(x, self.w[name + ".weight"])

    def _indexer(self, layer, x, qr, start_pos, freqs, mask):
        c = self.config
        p = f"model.layers.{layer}.self_attn.indexer"
        bsz, seqlen, _ = x.shape
        end_pos = start_pos + seqlen
        rope, n_heads, head_dim = c["qk_rope_head_dim"], c["index_n_heads"], c["index_head_dim"]
        q = self._linear(qr, p + ".wq_b").unflatten(-1, (n_heads, head_dim))
        q = torch.cat([_rope_halves(q[..., :rope], freqs), q[..., rope:]], dim=-1)
        k = F.layer_norm(self._linear(x, p + ".wk").float(), (head_dim,), self.w[p + ".k_norm.weight"],
                         self.w[p + ".k_norm.bias"], 1e-6).to(torch.bfloat16)
        k = torch.cat([_rope_halves(k[:, :, None, :rope], freqs)[:, :, 0], k[..., rope:]], dim=-1)
        q_fp8, q_scale = _act_quant(q @ self.hadamard, c["scale_fmt"])
        k_fp8, k_scale = _act_quant(k @ self.hadamard, c["scale_fmt"])
        self.k_cache[layer][:bsz, start_pos:end_pos] = k_fp8
        self.k_scale_cache[layer][:bsz, start_pos:end_pos] = k_scale[..., 0]
        weights = self._linear(x, p + ".weights_proj").float() * n_heads ** -0.5
        weights = weights * q_scale[..., 0] * head_dim ** -0.5
        logits = torch.einsum("bshd,btd->bsht", q_fp8, self.k_cache[layer][:bsz, :end_pos]).relu_()
        score = torch.einsum("bsht,bsh->bst", logits, weights) * self.k_scale_cache[layer][:bsz, None, :end_pos]
        if mask is not None:
            score = score + mask
        return score.topk(min(c["index_topk"], end_pos), dim=-1)[1]

    def _attention(self, layer, x, start_pos, freqs, mask):
        c = self.config
        p = f"model.layers.{layer}.self_attn"
        bsz, seqlen, _ = x.shape
        end_pos = start_pos + seqlen
        H, nope, rope, vdim, lat = (c["n_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"],
                                    c["v_head_dim"], c["kv_lora_rank"])
        qr = _rms_norm(self._linear(x, p + ".q_a_proj"), self.w[p + ".q_a_layernorm.weight"])
        q = self._linear(qr, p + ".q_b_proj").unflatten(-1, (H, nope + rope))
        q_nope, q_pe = q[..., :nope], _rope_interleaved(q[..., nope:], freqs)
        kv = self._linear(x, p + ".kv_a_proj_with_mqa")
        latent = _rms_norm(kv[..., :lat], self.w[p + ".kv_a_layernorm.weight"])
        k_pe = _rope_interleaved(kv[..., None, lat:], freqs)
        self.kv_cache[layer][:bsz, start_pos:end_pos] = latent
        self.pe_cache[layer][:bsz, start_pos:end_pos] = k_pe[:, :, 0]
        topk = self._indexer(layer, x, qr, start_pos, freqs, mask)
        index_mask = torch.full((bsz, seqlen, end_pos), float("-inf")).scatter_(-1, topk, 0.0)
        wkv_b = self.w[p + ".kv_b_proj.weight"].view(H, nope + vdim, lat)
        if mask is not None:  # prefill: multi-head attention over this chunk's keys
            kvb = F.linear(latent, self.w[p + ".kv_b_proj.weight"]).unflatten(-1, (H, nope + vdim))
            k = torch.cat([kvb[..., :nope], k_pe.expand(-1, -1, H, -1)], dim=-1)
            scores = torch.einsum("bshd,bthd->bsht", torch.cat([q_nope, q_pe], -1).float(), k.float())
            scores = scores * self.softmax_scale + (index_mask + mask).unsqueeze(2)
            probs = scores.softmax(dim=-1).to(torch.bfloat16)
            out = torch.einsum("bsht,bthd->bshd", probs, kvb[..., nope:])
        else:  # decode: queries absorbed into the latent space, attending the cache
            q_lat = torch.einsum("bshd,hdc->bshc", q_nope, wkv_b[:, :nope])
            scores = (torch.einsum("bshc,btc->bsht", q_lat.float(), self.kv_cache[layer][:bsz, :end_pos].float())
                      + torch.einsum("bshr,btr->bsht", q_pe.float(), self.pe_cache[layer][:bsz, :end_pos].float()))
            scores = scores * self.softmax_scale + index_mask.unsqueeze(2)
            probs = scores.softmax(dim=-1).to(torch.bfloat16)
            o_lat = torch.einsum("bsht,btc->bshc", probs, self.kv_cache[layer][:bsz, :end_pos])
            out = torch.einsum("bshc,hdc->bshd", o_lat, wkv_b[:, nope:])
        return self._linear(out.flatten(2), p + ".o_proj")

    def _mlp(self, x, prefix):
        hidden = F.silu(self._linear(x, prefix + ".gate_proj").float()) * self._linear(x, prefix + ".up_proj").float()
        return self._linear(hidden.to(torch.bfloat16), prefix + ".down_proj")

    def _route(self, x, prefix):
        c = self.config
        scores = F.linear(x.float(), self.w[prefix + ".gate.weight"])
        scores = scores.sigmoid() if c["score_func"] == "sigmoid" else scores.softmax(dim=-1)
        original = scores
        bias_name = prefix + ".gate.e_score_correction_bias"
        if has_score_correction_bias(c):
            scores = scores + self.w[bias_name]
        if c["n_expert_groups"] > 1:
            grouped = scores.view(x.size(0), c["n_expert_groups"], -1)
            if has_score_correction_bias(c):
                group_scores = grouped.topk(2, dim=-1)[0].sum(dim=-1)
            else:
                group_scores = grouped.amax(dim=-1)
            keep = group_scores.topk(c["n_limited_groups"], dim=-1)[1]
            drop = torch.ones_like(group_scores, dtype=torch.bool).scatter_(1, keep, False)
            scores = grouped.masked_fill(drop.unsqueeze(-1), float("-inf")).flatten(1)
        indices = scores.topk(c["n_activated_experts"], dim=-1)[1]
        weights = original.gather(1, indices)
        if c["score_func"] == "sigmoid":
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights * c["route_scale"], indices

    def _moe(self, x, prefix):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        weights, indices = self._route(x, prefix)
        y = torch.zeros(x.shape, dtype=torch.float32)
        counts = torch.bincount(indices.flatten(), minlength=self.config["n_routed_experts"]).tolist()
        for e, count in enumerate(counts):
            if count:
                rows, slot = torch.where(indices == e)
                y[rows] += self._mlp(x[rows], f"{prefix}.experts.{e}").float() * weights[rows, slot, None]
        if self.config["n_shared_experts"]:
            y += self._mlp(x, prefix + ".shared_experts").float()
        return y.view(shape)

    @torch.inference_mode()
    def forward(self, tokens, start_pos=0):
        """tokens [B, S] at positions start_pos..; returns the last position's logits [B, vocab] (f32)."""
        c = self.config
        bsz, seqlen = tokens.shape
        freqs = self.freqs[start_pos:start_pos + seqlen]
        mask = None
        if seqlen > 1:
            mask = torch.full((seqlen, start_pos + seqlen), float("-inf")).triu_(start_pos + 1)
        h = self.w["model.embed_tokens.weight"][tokens].float()  # the residual stream stays f32
        for layer in range(c["n_layers"]):
            p = f"model.layers.{layer}"
            x = _rms_norm(h, self.w[p + ".input_layernorm.weight"])
            h = h + self._attention(layer, x, start_pos, freqs, mask).float()
            x = _rms_norm(h, self.w[p + ".post_attention_layernorm.weight"])
            ffn = self._mlp(x, p + ".mlp") if layer < c["n_dense_layers"] else self._moe(x, p + ".mlp")
            h = h + ffn.float()
        last = _rms_norm(h[:, -1], self.w["model.norm.weight"]).float()
        return F.linear(last, self.w["lm_head.weight"])

    def generate(self, prompts, max_new_tokens):
        """Greedy completion of each prompt (lists of token ids), DeepSeek's way: one prefill of the
        shortest prompt's length, then one position per step for the whole batch."""
        c = self.config
        if len(prompts) > self.batch_capacity:
            self._allocate_caches(len(prompts))
            self.batch_capacity = len(prompts)
        lengths = [len(p) for p in prompts]
        total = min(c["max_seq_len"], max(lengths) + max_new_tokens)
        tokens = torch.full((len(prompts), total), -1, dtype=torch.long)
        for i, p in enumerate(prompts):
            tokens[i, : len(p)] = torch.tensor(p, dtype=torch.long)
        in_prompt = tokens != -1
        prev = 0
        for cur in range(min(lengths), total):
            logits = self.forward(tokens[:, prev:cur], prev)
            nxt = logits.argmax(dim=-1)
            tokens[:, cur] = torch.where(in_prompt[:, cur], tokens[:, cur], nxt)
            prev = cur
        return [tokens[i, n: n + max_new_tokens].tolist() for i, n in enumerate(lengths)]
