"""Tiny Qwen3.5 (hybrid Gated DeltaNet + gated full attention) fixture with an MTP head, in MLX layout, plus
float64 goldens from transformers' own Qwen3.5 code (docs/QWEN35.md says what every tensor and op is).

What it builds (SPEC below): a random Qwen3_5ForCausalLM text model of 6 layers, full_attention_interval 3
(linear, linear, full, linear, linear, full), untied LM head, and an MTP head (`mtp.*`: pre_fc_norm_embedding,
pre_fc_norm_hidden, fc, one full-attention decoder layer, norm) whose weights this script draws itself, since
transformers has no MTP module (it drops `mtp.*` on load). Weights are quantized to MLX affine 4-bit, group 64
(quantize() below is make_tiny_a_fixture.py's, copied), norms/conv/dt_bias rounded to bf16, A_log to f32; the
transformers model then computes with exactly the stored values (dequantized in float64).

Goldens (golden.safetensors, float64 unless noted; golden.json says what each is):
  - transformers Qwen3.5 in torch.float64 with every float32 cast of its code patched to float64: the torch
    fallbacks torch_chunk_gated_delta_rule / torch_recurrent_gated_delta_rule (cast q, k, v, g, beta to
    float32), the g computation in Qwen3_5GatedDeltaNet.forward (A_log.float(), a.float()), Qwen3_5RMSNorm and
    Qwen3_5RMSNormGated (float32 normalisation), the rotary tables (float32 inv_freq, "force float32" angles)
    and eager attention's float32 softmax. The patches are the library's own source with those casts rewritten
    (ast + exec), never a re-implementation; a TorchDispatchMode checks that no floating tensor other than
    float64 appears in any golden forward, and call counters check that the patched chunked and recurrent
    rules are the ones that ran.
  - full forward over the prompt (logits, per-layer activations), teacher-forced logits over prompt+greedy,
    and a cached greedy decode run by hand (prefill with the cache = chunked rule, then one token at a time =
    recurrent rule and causal_conv1d_update), with the logits of every step and the conv / recurrent state
    after the prefill;
  - the MTP head's draft tokens from this script's own float64 numpy implementation (vLLM's
    qwen3_5_mtp.py structure, post-final-norm hidden; no oracle exists), whose target forward is cross-checked
    against transformers (the difference is in golden.json);
  - transformers-f32.safetensors: the stock (unpatched) code with the model in float32, same tensor names: the
    yardstick of what f32 achieves (per-activation max abs error and NMSE against float64 in golden.json).

usage (device, from the repository root; torch + transformers >= 5.x with qwen3_5, numpy; no safetensors needed):
    python3 tools/make_qwen_fixtures.py OUTDIR            -> OUTDIR/qwen-tiny.tar.gz (one file)
    tar xzf OUTDIR/qwen-tiny.tar.gz -C test/fixtures/     -> test/fixtures/qwen-tiny/...
  python3 tools/make_qwen_fixtures.py --selftest OUTDIR  (numpy only: quantization, export, the numpy model,
    block == steps; writes the same layout with numpy goldens, marked as such, for local development)
"""
import argparse, ast, hashlib, io, json, math, os, shutil, sys, tarfile, tempfile, textwrap, time
import numpy as np

NAME = "qwen-tiny"
SPEC = dict(
    vocab=1024, hidden=128, inter=256, layers=6, interval=3,
    heads=4, kv=2, hd=64, partial=0.25, theta=10000000.0, mrope_section=[4, 2, 2],
    lk_heads=2, lv_heads=4, lk_dim=32, lv_dim=32, conv=4, eps=1e-6,
    group=64, bits=4, prompt_len=24, new_tokens=16, draft_steps=3, seed=3535,
    final_norm=3.0, embed_std=1.0,
)
T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


# ------------------------------------------------------------------ bf16 + MLX affine quantization (make_tiny_a_fixture.py)
def bf16_round(a):
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r  # raw bf16 bits


def bf16_to_f64(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def quantize(w, group, bits):
    """MLX affine quantization: returns packed uint32 [out, in*bits/32], scales/biases bf16 bits [out, in/group]."""
    out_f, in_f = w.shape
    assert in_f % group == 0
    n_bins = (1 << bits) - 1
    g = w.reshape(out_f, in_f // group, group).astype(np.float64)
    wmax, wmin = g.max(-1, keepdims=True), g.min(-1, keepdims=True)
    mask = np.abs(wmin) > np.abs(wmax)
    scale = np.maximum((wmax - wmin) / n_bins, 1e-7)
    scale = np.where(mask, scale, -scale)
    edge = np.where(mask, wmin, wmax)
    q0 = np.round(edge / scale)
    scale = np.where(q0 != 0, edge / np.where(q0 == 0, 1, q0), scale)
    bias = np.where(q0 == 0, 0.0, edge)
    s_bits, b_bits = bf16_round(scale[..., 0]), bf16_round(bias[..., 0])
    s, b = bf16_to_f64(s_bits)[..., None], bf16_to_f64(b_bits)[..., None]
    q = np.clip(np.round((g - b) / s), 0, n_bins).astype(np.uint32)
    deq = (s * q + b).reshape(out_f, in_f)
    per = 32 // bits
    q = q.reshape(out_f, in_f // per, per)
    packed = np.zeros((out_f, in_f // per), dtype=np.uint32)
    for j in range(per):
        packed |= q[..., j] << np.uint32(bits * j)
    return packed, s_bits, b_bits, deq


def dequant(packed, s_bits, b_bits, group, bits):
    """Inverse of quantize() from the stored tensors (w = s * q + b, exact in float64)."""
    out_f = packed.shape[0]
    per, mask = 32 // bits, (1 << bits) - 1
    q = np.empty(packed.shape + (per,), dtype=np.uint32)
    for j in range(per):
        q[..., j] = (packed >> np.uint32(bits * j)) & np.uint32(mask)
    q = q.reshape(out_f, -1, group).astype(np.float64)
    return (bf16_to_f64(s_bits)[..., None] * q + bf16_to_f64(b_bits)[..., None]).reshape(out_f, -1)


# ------------------------------------------------------------------------------------ safetensors (no dependency)
DT = {np.dtype("float64"): "F64", np.dtype("float32"): "F32", np.dtype("int32"): "I32", np.dtype("uint32"): "U32",
      np.dtype("uint16"): "BF16"}  # uint16 arrays are bf16 bit patterns
NP = {"F64": "<f8", "F32": "<f4", "I32": "<i4", "U32": "<u4", "BF16": "<u2", "U16": "<u2"}


def write_safetensors(path, tensors, metadata=None):
    """MLX-style writer: compact header (padded with spaces to 8 bytes), data in insertion order."""
    hdr, off, blobs = {}, 0, []
    if metadata:
        hdr["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for k, a in tensors.items():
        a = np.ascontiguousarray(a)
        dt = DT[a.dtype]
        b = a.astype(NP[dt], copy=False).tobytes()
        hdr[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Raw arrays (BF16 as uint16 bits) and dtypes."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(n))
        body = f.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = (np.frombuffer(body[a:b], dtype=NP[v["dtype"]]).reshape(v["shape"]).copy(), v["dtype"])
    return out


# ----------------------------------------------------------------------------------------------- the tiny model
def layer_types(s):
    return ["full_attention" if (i + 1) % s["interval"] == 0 else "linear_attention" for i in range(s["layers"])]


def text_config(s):
    """config.json's text_config (Qwen3_5TextConfig fields plus the MTP ones of real checkpoints)."""
    return dict(
        model_type="qwen3_5_text", vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["inter"],
        num_hidden_layers=s["layers"], num_attention_heads=s["heads"], num_key_value_heads=s["kv"],
        head_dim=s["hd"], hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=s["eps"],
        tie_word_embeddings=False, attention_bias=False, attn_output_gate=True,
        full_attention_interval=s["interval"], layer_types=layer_types(s),
        linear_conv_kernel_dim=s["conv"], linear_key_head_dim=s["lk_dim"], linear_value_head_dim=s["lv_dim"],
        linear_num_key_heads=s["lk_heads"], linear_num_value_heads=s["lv_heads"],
        rope_parameters={"rope_type": "default", "rope_theta": s["theta"], "partial_rotary_factor": s["partial"],
                         "mrope_section": s["mrope_section"], "mrope_interleaved": True},
        mtp_num_hidden_layers=1, mtp_use_dedicated_embeddings=False,
        eos_token_id=[s["vocab"] - 1],
    )


HF_CONFIG_KEYS = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "rms_norm_eps",
                  "tie_word_embeddings", "attention_bias", "layer_types", "linear_conv_kernel_dim",
                  "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads", "linear_num_value_heads",
                  "rope_parameters"]

# Qwen3_5RMSNorm (zero-centred: computes x_hat * (1 + w)); MLX stores 1 + w (mlx_lm qwen3_5.py sanitize).
ZERO_CENTRED = (".input_layernorm.weight", ".post_attention_layernorm.weight", ".q_norm.weight", ".k_norm.weight",
                "model.norm.weight", "mtp.norm.weight", "mtp.pre_fc_norm_embedding.weight",
                "mtp.pre_fc_norm_hidden.weight")


def is_zero_centred(name):
    return name.endswith(ZERO_CENTRED)


def draw_weights(s, rng):
    """HF-layout parameters (float64, zero-centred norms as HF stores them) of the target and the MTP head."""
    H, I, V = s["hidden"], s["inter"], s["vocab"]
    nh, kv, hd = s["heads"], s["kv"], s["hd"]
    kd, vd = s["lk_heads"] * s["lk_dim"], s["lv_heads"] * s["lv_dim"]
    C, K, Hv = 2 * kd + vd, s["conv"], s["lv_heads"]
    w = {}

    def lin(name, out, inp):
        w[name] = rng.standard_normal((out, inp)) / math.sqrt(inp)

    def norm(name, n, scale=1.0):  # effective weight scale * (1 + 0.25 N); HF zero-centred stores effective - 1
        w[name] = scale * (1.0 + 0.25 * rng.standard_normal(n)) - 1.0

    def attn_layer(p):
        lin(p + "self_attn.q_proj.weight", 2 * nh * hd, H)  # per head: [query (hd), gate (hd)]
        lin(p + "self_attn.k_proj.weight", kv * hd, H)
        lin(p + "self_attn.v_proj.weight", kv * hd, H)
        lin(p + "self_attn.o_proj.weight", H, nh * hd)
        norm(p + "self_attn.q_norm.weight", hd)
        norm(p + "self_attn.k_norm.weight", hd)

    def common(p):
        norm(p + "input_layernorm.weight", H)
        norm(p + "post_attention_layernorm.weight", H)
        lin(p + "mlp.gate_proj.weight", I, H)
        lin(p + "mlp.up_proj.weight", I, H)
        lin(p + "mlp.down_proj.weight", H, I)

    w["model.embed_tokens.weight"] = s["embed_std"] * rng.standard_normal((V, H))
    for i, t in enumerate(layer_types(s)):
        p = f"model.layers.{i}."
        common(p)
        if t == "full_attention":
            attn_layer(p)
        else:
            a = p + "linear_attn."
            lin(a + "in_proj_qkv.weight", C, H)
            lin(a + "in_proj_z.weight", vd, H)
            lin(a + "in_proj_b.weight", Hv, H)
            lin(a + "in_proj_a.weight", Hv, H)
            lin(a + "out_proj.weight", H, vd)
            w[a + "conv1d.weight"] = rng.standard_normal((C, 1, K)) / math.sqrt(K)  # HF [C, 1, K]
            w[a + "dt_bias"] = 1.0 + 0.5 * rng.standard_normal(Hv)
            w[a + "A_log"] = np.log(rng.uniform(0.02, 1.0, Hv))  # decays exp(-A softplus(.)) in ~[0.5, 0.99]
            w[a + "norm.weight"] = 1.0 + 0.25 * rng.standard_normal(s["lv_dim"])  # RMSNormGated: not zero-centred
    norm("model.norm.weight", H, s["final_norm"])
    lin("lm_head.weight", V, H)
    # MTP head (vLLM qwen3_5_mtp.py Qwen3_5MultiTokenPredictor): fc over [norm(embed), norm(hidden)]
    norm("mtp.pre_fc_norm_embedding.weight", H)
    norm("mtp.pre_fc_norm_hidden.weight", H)
    lin("mtp.fc.weight", H, 2 * H)
    common("mtp.layers.0.")
    attn_layer("mtp.layers.0.")
    norm("mtp.norm.weight", H, s["final_norm"])
    return w


def mlx_name(name):
    """mlx_lm qwen3_5 Model.sanitize: model.* -> language_model.model.*, lm_head -> language_model.lm_head; the
    MTP conversions keep mtp.* at the root."""
    if name.startswith("mtp."):
        return name
    return "language_model." + name


def export(w, s, path):
    """Rounds/quantizes every parameter as an MLX 4-bit conversion stores it and writes model.safetensors.
    Returns (hf, eff): HF-layout float64 values that reproduce the stored ones exactly (zero-centred norms as
    stored - 1, conv as [C, 1, K]) and the effective (as-stored, dequantized) float64 values by MLX name."""
    tensors, hf, eff, quantized = {}, {}, {}, []
    for name, a in w.items():
        m = mlx_name(name)
        if a.ndim == 2 and a.shape[1] % s["group"] == 0:
            packed, sb, bb, deq = quantize(a, s["group"], s["bits"])
            mod = m[: -len(".weight")]
            tensors[mod + ".weight"], tensors[mod + ".scales"], tensors[mod + ".biases"] = packed, sb, bb
            assert np.array_equal(dequant(packed, sb, bb, s["group"], s["bits"]), deq)
            hf[name], eff[m] = deq, deq
            quantized.append(mod)
        elif name.endswith("conv1d.weight"):
            bits = bf16_round(np.transpose(a, (0, 2, 1)).astype(np.float32))  # MLX [C, K, 1]
            tensors[m] = bits
            eff[m] = bf16_to_f64(bits)
            hf[name] = np.transpose(eff[m], (0, 2, 1))
        elif name.endswith("A_log"):
            v = a.astype(np.float32)  # mlx_lm cast_predicate keeps A_log in float32
            tensors[m] = v
            eff[m] = hf[name] = v.astype(np.float64)
        elif is_zero_centred(name):
            bits = bf16_round((1.0 + a).astype(np.float32))
            tensors[m] = bits
            eff[m] = bf16_to_f64(bits)
            hf[name] = eff[m] - 1.0  # exact: 1 + (v - 1) == v in float64
        else:
            bits = bf16_round(a.astype(np.float32))
            tensors[m] = bits
            eff[m] = hf[name] = bf16_to_f64(bits).reshape(a.shape)
    write_safetensors(path, tensors, metadata={"format": "mlx"})
    qcfg = {"group_size": s["group"], "bits": s["bits"], "mode": "affine"}
    return hf, eff, qcfg, quantized


# ------------------------------------------------------------------ numpy float64 model (mirrors src/reference/qwen)
def softplus(x):  # torch.nn.functional.softplus, beta 1, threshold 20
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * w


class NumpyQwen:
    """Float64 Qwen3.5 text model + MTP head on the effective (stored) weights. State per layer: GDN layers a conv
    window [K-1, C] (raw qkv projections, oldest first) and S [Hv, Dk, Dv]; attention layers K, V [T, kv, hd]."""

    def __init__(self, eff, s):
        self.s, self.w = s, eff
        self.types = layer_types(s)
        self.rot = int(s["hd"] * s["partial"])
        self.inv_freq = 1.0 / (s["theta"] ** (np.arange(0, self.rot, 2, dtype=np.int64).astype(np.float64) / self.rot))

    def W(self, n):
        return self.w[n]

    def new_state(self):
        s = self.s
        C = 2 * s["lk_heads"] * s["lk_dim"] + s["lv_heads"] * s["lv_dim"]
        st = []
        for t in self.types:
            if t == "full_attention":
                st.append({"k": np.zeros((0, s["kv"], s["hd"])), "v": np.zeros((0, s["kv"], s["hd"]))})
            else:
                st.append({"conv": np.zeros((s["conv"] - 1, C)),
                           "S": np.zeros((s["lv_heads"], s["lk_dim"], s["lv_dim"]))})
        return st

    def rope(self, x, pos):  # x [T, heads, hd]; rotate_half over the first `rot` dims
        r, half = self.rot, self.rot // 2
        ang = np.asarray(pos, np.float64)[:, None] * self.inv_freq[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        out = x.copy()
        x1, x2 = x[..., :half], x[..., half:r]
        out[..., :half] = x1 * cos - x2 * sin
        out[..., half:r] = x2 * cos + x1 * sin
        return out

    def attention(self, p, x, pos, st):
        s = self.s
        T, nh, kv, hd = x.shape[0], s["heads"], s["kv"], s["hd"]
        qg = (x @ self.W(p + "self_attn.q_proj.weight").T).reshape(T, nh, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:].reshape(T, nh * hd)
        k = (x @ self.W(p + "self_attn.k_proj.weight").T).reshape(T, kv, hd)
        v = (x @ self.W(p + "self_attn.v_proj.weight").T).reshape(T, kv, hd)
        q = self.rope(rms(q, self.W(p + "self_attn.q_norm.weight"), s["eps"]), pos)
        k = self.rope(rms(k, self.W(p + "self_attn.k_norm.weight"), s["eps"]), pos)
        st["k"], st["v"] = np.concatenate([st["k"], k]), np.concatenate([st["v"], v])
        K_, V_ = st["k"], st["v"]
        L = K_.shape[0]
        out = np.zeros((T, nh, hd))
        for h in range(nh):
            g = h // (nh // kv)
            sc = (q[:, h] @ K_[:, g].T) * hd ** -0.5
            mask = np.arange(L)[None, :] > (L - T + np.arange(T))[:, None]
            sc = np.where(mask, -np.inf, sc)
            sc = np.exp(sc - sc.max(-1, keepdims=True))
            out[:, h] = (sc / sc.sum(-1, keepdims=True)) @ V_[:, g]
        return (out.reshape(T, nh * hd) * sigmoid(gate)) @ self.W(p + "self_attn.o_proj.weight").T

    def gdn(self, p, x, st, capture=None):
        s = self.s
        T = x.shape[0]
        Hk, Hv, Dk, Dv, K = s["lk_heads"], s["lv_heads"], s["lk_dim"], s["lv_dim"], s["conv"]
        kd = Hk * Dk
        a = p + "linear_attn."
        qkv = x @ self.W(a + "in_proj_qkv.weight").T
        z = (x @ self.W(a + "in_proj_z.weight").T).reshape(T, Hv, Dv)
        b = x @ self.W(a + "in_proj_b.weight").T
        aa = x @ self.W(a + "in_proj_a.weight").T
        cw = self.W(a + "conv1d.weight")[:, :, 0]  # [C, K]
        win = np.concatenate([st["conv"], qkv])  # [K-1+T, C]
        conv = np.stack([(win[t:t + K] * cw.T).sum(0) for t in range(T)])
        st["conv"] = win[-(K - 1):].copy()
        conv = silu(conv)
        q, k, v = conv[:, :kd].reshape(T, Hk, Dk), conv[:, kd:2 * kd].reshape(T, Hk, Dk), conv[:, 2 * kd:].reshape(T, Hv, Dv)
        q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6) * Dk ** -0.5
        k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
        beta = sigmoid(b)
        g = np.exp(-np.exp(self.W(a + "A_log")) * softplus(aa + self.W(a + "dt_bias")))
        S = st["S"]
        o = np.zeros((T, Hv, Dv))
        for t in range(T):
            for h in range(Hv):
                hk = h // (Hv // Hk)
                S[h] *= g[t, h]
                delta = (v[t, h] - k[t, hk] @ S[h]) * beta[t, h]
                S[h] += np.outer(k[t, hk], delta)
                o[t, h] = q[t, hk] @ S[h]
        y = rms(o, self.W(a + "norm.weight"), s["eps"]) * silu(z)
        if capture is not None:
            capture["recurrence"], capture["gated_norm"] = o.reshape(T, -1), y.reshape(T, -1)
        return y.reshape(T, -1) @ self.W(a + "out_proj.weight").T

    def mlp(self, p, x):
        g = x @ self.W(p + "mlp.gate_proj.weight").T
        u = x @ self.W(p + "mlp.up_proj.weight").T
        return (silu(g) * u) @ self.W(p + "mlp.down_proj.weight").T

    def embed(self, ids):
        return self.W("language_model.model.embed_tokens.weight")[np.asarray(ids)]

    def forward(self, ids, pos0, state, acts=None):
        """Runs len(ids) tokens from position pos0, updating `state`; returns (logits, final-norm hidden)."""
        s = self.s
        x = self.embed(ids)
        pos = pos0 + np.arange(len(ids))
        for i, t in enumerate(self.types):
            p = f"language_model.model.layers.{i}."
            h = rms(x, self.W(p + "input_layernorm.weight"), s["eps"])
            cap = {}
            m = self.attention(p, h, pos, state[i]) if t == "full_attention" else self.gdn(p, h, state[i], cap)
            x = x + m
            f = self.mlp(p, rms(x, self.W(p + "post_attention_layernorm.weight"), s["eps"]))
            x = x + f
            if acts is not None:
                acts[f"act.attn.{i}"], acts[f"act.mlp.{i}"], acts[f"act.layer.{i}"] = m, f, x
                for kk, vv in cap.items():
                    acts[f"act.gdn.{kk}.{i}"] = vv
        hn = rms(x, self.W("language_model.model.norm.weight"), s["eps"])
        if acts is not None:
            acts["act.final_norm"] = hn
        return hn @ self.W("language_model.lm_head.weight").T, hn

    def mtp(self, ids, hidden, pos0, st):
        """MTP head over len(ids) rows: row j pairs token ids[j] (the token after position pos0 + j) with the
        hidden of position pos0 + j; returns (logits, post-mtp.norm hidden)."""
        s = self.s
        e = rms(self.embed(ids), self.W("mtp.pre_fc_norm_embedding.weight"), s["eps"])
        h = rms(hidden, self.W("mtp.pre_fc_norm_hidden.weight"), s["eps"])
        x = np.concatenate([e, h], -1) @ self.W("mtp.fc.weight").T
        p = "mtp.layers.0."
        pos = pos0 + np.arange(len(ids))
        x = x + self.attention(p, rms(x, self.W(p + "input_layernorm.weight"), s["eps"]), pos, st)
        x = x + self.mlp(p, rms(x, self.W(p + "post_attention_layernorm.weight"), s["eps"]))
        hn = rms(x, self.W("mtp.norm.weight"), s["eps"])
        return hn @ self.W("language_model.lm_head.weight").T, hn


def mtp_drafts(npm, prompt, seed_hidden, bonus, steps):
    """vLLM's MTP proposer in float64: the head first runs over every prompt position p with (token p+1, target
    hidden p) -- the last row pairs the bonus token with the last prompt hidden -- filling its own KV cache; draft
    j+1 then feeds draft j with the head's own post-norm hidden, one position further."""
    T = len(prompt)
    st = {"k": np.zeros((0, npm.s["kv"], npm.s["hd"])), "v": np.zeros((0, npm.s["kv"], npm.s["hd"]))}
    logits, hid = npm.mtp(list(prompt[1:]) + [bonus], seed_hidden, 0, st)
    prompt_hidden = hid
    toks, lg, hs = [], [], []
    l, h = logits[-1], hid[-1]
    for j in range(steps):
        tok = int(np.argmax(l))
        toks.append(tok)
        lg.append(l)
        hs.append(h)
        if j + 1 < steps:
            l2, h2 = npm.mtp([tok], h[None, :], T + j, st)
            l, h = l2[0], h2[0]
    return toks, np.stack(lg), np.stack(hs), prompt_hidden


def numpy_goldens(npm, s, prompt):
    """The golden set computed by the numpy model (selftest; on the device only as a cross-check)."""
    T, N = len(prompt), s["new_tokens"]
    acts = {}
    logits, hn = npm.forward(prompt, 0, npm.new_state(), acts)
    st = npm.new_state()
    l0, _ = npm.forward(prompt, 0, st)
    rows, greedy = [l0[-1]], [int(np.argmax(l0[-1]))]
    for j in range(1, N):
        l1, _ = npm.forward([greedy[-1]], T + j - 1, st)
        rows.append(l1[0])
        greedy.append(int(np.argmax(l1[0])))
    full, _ = npm.forward(prompt + greedy, 0, npm.new_state())
    return logits, hn, acts, greedy, np.stack(rows), full


# ------------------------------------------------------------------------------------------------------ packaging
def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def make_tar(src_dir, out_path):
    with tarfile.open(out_path, "w:gz") as tf:
        tf.add(src_dir, arcname=NAME)
    return os.path.getsize(out_path)


def write_target(d, s, rng_seed):
    rng = np.random.default_rng(rng_seed)
    w = draw_weights(s, rng)
    os.makedirs(os.path.join(d, "target"), exist_ok=True)
    hf, eff, qcfg, quantized = export(w, s, os.path.join(d, "target", "model.safetensors"))
    cfg = {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
           "text_config": text_config(s), "tie_word_embeddings": False,
           "quantization": qcfg, "quantization_config": qcfg}
    json.dump(cfg, open(os.path.join(d, "target", "config.json"), "w"), indent=2)
    return hf, eff, quantized


def prompt_of(s):
    return [(37 * i + 11) % s["vocab"] for i in range(s["prompt_len"])]


# ------------------------------------------------------------------------------------------------------- selftest
def selftest(outdir):
    s = dict(SPEC)
    work = tempfile.mkdtemp()
    d = os.path.join(work, NAME)
    # 1. quantization: exact round trip, codes in range, packing order
    rng = np.random.default_rng(1)
    a = rng.standard_normal((8, 128))
    packed, sb, bb, deq = quantize(a, 64, 4)
    assert np.array_equal(dequant(packed, sb, bb, 64, 4), deq)
    assert np.abs(deq - a).max() < 0.5, np.abs(deq - a).max()
    assert bf16_to_f64(bf16_round(np.array([1.0, -2.5, 3.140625]))).tolist() == [1.0, -2.5, 3.140625]
    log("quantize: round trip exact, max |w - deq|", float(np.abs(deq - a).max()))
    # 2. export + reader: every stored tensor reproduces the effective weights
    hf, eff, quantized = write_target(d, s, s["seed"])
    st = read_safetensors(os.path.join(d, "target", "model.safetensors"))
    for name, (arr, dt) in st.items():
        if name.endswith((".scales", ".biases")):
            assert dt == "BF16", name
            continue
        mod = name[: -len(".weight")]
        if mod + ".scales" in st:
            assert dt == "U32" and arr.shape[1] * 8 == eff[name].shape[1], name
            got = dequant(arr, st[mod + ".scales"][0], st[mod + ".biases"][0], s["group"], s["bits"])
        else:
            assert dt == ("F32" if name.endswith("A_log") else "BF16"), (name, dt)
            got = arr.astype(np.float64) if dt == "F32" else bf16_to_f64(arr).reshape(arr.shape)
        assert np.array_equal(got, eff[name]), name
    conv = [k for k in st if k.endswith("conv1d.weight")]
    assert conv and all(st[k][0].shape == (2 * 64 + 128, s["conv"], 1) for k in conv), [st[k][0].shape for k in conv]
    assert any(k.startswith("mtp.") for k in st) and "language_model.lm_head.weight" in st
    for n, v in hf.items():  # HF values reproduce the stored ones
        m = mlx_name(n)
        if is_zero_centred(n):
            assert np.array_equal(1.0 + v, eff[m]), n
    log(f"export: {len(st)} tensors ({len(quantized)} quantized linears), {os.path.getsize(os.path.join(d, 'target', 'model.safetensors'))} bytes")
    # 3. numpy model: block == steps (state after K tokens at once == K single steps), prompt forward
    npm = NumpyQwen(eff, s)
    prompt = prompt_of(s)
    s1, s2 = npm.new_state(), npm.new_state()
    la, _ = npm.forward(prompt[:10], 0, s1)
    lb = [npm.forward([t], i, s2)[0][0] for i, t in enumerate(prompt[:10])]
    err = float(np.abs(la - np.stack(lb)).max())
    for x, y in zip(s1, s2):
        for k in x:
            err = max(err, float(np.abs(x[k] - y[k]).max()))
    assert err < 1e-12, err
    log("numpy block vs steps max |diff|", err)
    logits, hn, acts, greedy, rows, full = numpy_goldens(npm, s, prompt)
    assert np.abs(full[:len(prompt)] - logits).max() < 1e-12
    bonus = int(np.argmax(logits[-1]))
    toks, dl, dh, ph = mtp_drafts(npm, prompt, hn, bonus, s["draft_steps"])
    srt = np.sort(full[len(prompt) - 1:-1], -1)
    g = {"prompt": np.array(prompt, np.int32), "logits": logits, "logits_full": full,
         "greedy": np.array(greedy, np.int32), "greedy_logits": rows,
         "mtp.seed_hidden": hn[-1], "mtp.draft.tokens": np.array(toks, np.int32), "mtp.draft.logits": dl,
         "mtp.draft.hidden": dh, "mtp.prompt_hidden": ph, **acts}
    write_safetensors(os.path.join(d, "golden.safetensors"), g, {"source": "numpy selftest"})
    meta = {"name": NAME, "source": "numpy-selftest (NOT transformers: development only)", "spec": s,
            "prompt": prompt, "greedy": greedy, "bonus_token": bonus,
            "mtp": {"tokens": toks, "position_id": len(prompt) - 1},
            "greedy_min_top1_gap": float((srt[:, -1] - srt[:, -2]).min())}
    json.dump(meta, open(os.path.join(d, "golden.json"), "w"), indent=1)
    os.makedirs(outdir, exist_ok=True)
    size = make_tar(d, os.path.join(outdir, NAME + ".tar.gz"))
    dest = os.path.join(outdir, NAME)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(d, dest)
    shutil.rmtree(work)
    log(f"selftest ok: greedy {greedy[:8]}..., drafts {toks}, tar {size} bytes, unpacked in {dest}")


# ------------------------------------------------------------------------------------ transformers float64 patches
F64_REWRITES = [("torch.float32", "torch.float64"), (".float()", ".double()"),
                ("dtype=torch.float)", "dtype=torch.float64)"), ("dtype=torch.float,", "dtype=torch.float64,")]
PATCH_FUNCS = ["l2norm", "torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "causal_conv1d_fn",
               "causal_conv1d_update", "eager_attention_forward"]
PATCH_METHODS = [("Qwen3_5RMSNorm", "_norm"), ("Qwen3_5RMSNorm", "forward"), ("Qwen3_5RMSNormGated", "forward"),
                 ("Qwen3_5GatedDeltaNet", "forward"), ("Qwen3_5TextRotaryEmbedding", "forward")]
CALLS = {}


def f64_patch(mq, notes):
    """Re-executes the listed functions / methods of transformers' modeling_qwen3_5 from its own source with the
    float32 casts rewritten to float64 and decorators dropped (so the hub-kernel wrappers, which would pick FLA /
    causal-conv1d CUDA kernels when installed, give way to the torch fallbacks). Returns the new namespace."""
    src = open(mq.__file__).read()
    lines = src.split("\n")
    tree = ast.parse(src)
    top = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    ns = dict(mq.__dict__)

    def compile_node(node, label):
        code = textwrap.dedent("\n".join(lines[node.lineno - 1: node.end_lineno]))
        n_rep = {}
        for a, b in F64_REWRITES:
            n_rep[a] = code.count(a)
            code = code.replace(a, b)
        exec(compile(code, f"<float64 {label}>", "exec"), ns)
        notes.append(f"{label}: " + ", ".join(f"{k} x{v}" for k, v in n_rep.items() if v) if any(n_rep.values()) else f"{label}: no casts")
        return ns[node.name]

    for fn in PATCH_FUNCS:
        if fn not in top:
            notes.append(f"{fn}: not in this transformers version (skipped)")
            continue
        f = compile_node(top[fn], fn)

        def counted(*a, _f=f, _n=fn, **k):
            CALLS[_n] = CALLS.get(_n, 0) + 1
            return _f(*a, **k)

        ns[fn] = counted
        setattr(mq, fn, counted)
    # Attention goes through the registry: route "eager" to the patched module function even if the registry
    # holds a generic eager implementation of its own.
    reg = getattr(mq, "ALL_ATTENTION_FUNCTIONS", None)
    if reg is not None and hasattr(reg, "get_interface") and "eager_attention_forward" in ns:
        orig_get, eager = reg.get_interface, ns["eager_attention_forward"]

        def get_interface(name, default=None, *a, **k):
            return eager if name == "eager" else orig_get(name, default, *a, **k)

        reg.get_interface = get_interface
        notes.append("ALL_ATTENTION_FUNCTIONS.get_interface('eager') -> the float64 eager_attention_forward")
    for cls_name, meth in PATCH_METHODS:
        cls_node = top.get(cls_name)
        node = next((n for n in (cls_node.body if cls_node else []) if isinstance(n, ast.FunctionDef) and n.name == meth), None)
        if node is None:
            notes.append(f"{cls_name}.{meth}: not found (skipped)")
            continue
        setattr(getattr(mq, cls_name), meth, compile_node(node, f"{cls_name}.{meth}"))
    return ns


def main_device(outdir):
    import torch
    import transformers
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq

    F64 = torch.float64
    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    s = dict(SPEC)
    lines = []

    def note(*a):
        log(*a)
        lines.append(" ".join(str(x) for x in a))

    note(f"torch {torch.__version__}, transformers {transformers.__version__}, numpy {np.__version__}")
    work = tempfile.mkdtemp()
    d = os.path.join(work, NAME)
    hf, eff, quantized = write_target(d, s, s["seed"])
    note(f"target written: {len(quantized)} quantized linears")

    tc = text_config(s)
    cfg_kwargs = {k: tc[k] for k in HF_CONFIG_KEYS}

    def build(dtype):
        cfg = Qwen3_5TextConfig(**cfg_kwargs)
        try:
            cfg._attn_implementation = "eager"
        except Exception as e:
            note(f"config._attn_implementation not settable ({e!r})")
        m = Qwen3_5ForCausalLM(cfg).eval()
        if getattr(m.config, "_attn_implementation", None) != "eager":
            try:
                m.set_attn_implementation("eager")
            except Exception as e:
                note(f"set_attn_implementation('eager') failed ({e!r}); attention runs {m.config._attn_implementation}")
        m = m.to(dtype)
        params = dict(m.named_parameters())
        used = set()
        with torch.no_grad():
            for name, p in params.items():
                if name not in hf:
                    raise KeyError(f"transformers parameter {name} has no value here (this script's names: {sorted(hf)[:6]} ...)")
                v = hf[name]
                assert tuple(v.shape) == tuple(p.shape), (name, v.shape, tuple(p.shape))
                p.copy_(torch.from_numpy(np.ascontiguousarray(v)).to(dtype))
                used.add(name)
        left = sorted(k for k in hf if k not in used and not k.startswith("mtp."))
        assert not left, f"parameters not loaded: {left}"
        assert m.lm_head.weight.data_ptr() != m.model.embed_tokens.weight.data_ptr(), "lm_head tied"
        return m, cfg

    T, N = s["prompt_len"], s["new_tokens"]
    C = 2 * s["lk_heads"] * s["lk_dim"] + s["lv_heads"] * s["lv_dim"]
    prompt = prompt_of(s)
    ids = torch.tensor([prompt])
    types = layer_types(s)

    def run_acts(model):
        cap, hooks = {}, []
        for i, layer in enumerate(model.model.layers):
            mixer = layer.linear_attn if types[i] == "linear_attention" else layer.self_attn
            hooks.append(mixer.register_forward_hook(lambda m, a, o, i=i: cap.__setitem__(f"act.attn.{i}", (o[0] if isinstance(o, tuple) else o).detach().clone())))
            hooks.append(layer.mlp.register_forward_hook(lambda m, a, o, i=i: cap.__setitem__(f"act.mlp.{i}", o.detach().clone())))
            hooks.append(layer.register_forward_hook(lambda m, a, o, i=i: cap.__setitem__(f"act.layer.{i}", (o[0] if isinstance(o, tuple) else o).detach().clone())))
            if types[i] == "linear_attention":
                def gn(m, a, o, i=i):
                    cap[f"act.gdn.recurrence.{i}"] = a[0].detach().clone().reshape(1, T, -1)
                    cap[f"act.gdn.gated_norm.{i}"] = o.detach().clone().reshape(1, T, -1)
                hooks.append(layer.linear_attn.norm.register_forward_hook(gn))
        hooks.append(model.model.norm.register_forward_hook(lambda m, a, o: cap.__setitem__("act.final_norm", o.detach().clone())))
        with torch.no_grad():
            out = model(ids, use_cache=False)
        for h in hooks:
            h.remove()
        res = {"logits": out.logits[0]}
        res.update({k: v[0] for k, v in cap.items()})
        return res

    def cached_decode(model):
        """Prefill with the cache (chunked rule), then one token at a time (recurrent rule)."""
        with torch.no_grad():
            out = model(ids, use_cache=True)
            pkv = out.past_key_values
            rows = [out.logits[0, -1]]
            toks = [int(rows[-1].argmax())]
            state = {}
            for i, t in enumerate(types):
                if t != "linear_attention":
                    continue
                try:
                    L = pkv.layers[i]
                    conv, rec = L.conv_states[0][0].detach().clone(), L.recurrent_states[0][0].detach().clone()
                    # transformers 5.17 keeps the last K inputs (causal_conv1d_update rolls the window, then
                    # writes the new input, so the oldest is never used again): the state is the last K - 1
                    if conv.shape[-1] == s["conv"]:
                        conv = conv[:, 1:].clone()
                    want = ((C, s["conv"] - 1), (s["lv_heads"], s["lk_dim"], s["lv_dim"]))
                    assert (tuple(conv.shape), tuple(rec.shape)) == want, (tuple(conv.shape), tuple(rec.shape), want)
                    state[f"state.conv.{i}"], state[f"state.recurrent.{i}"] = conv, rec
                except Exception as e:  # the cache API moves between versions: recorded, not fatal
                    state.setdefault("_error", repr(e))
            for _ in range(1, N):
                out = model(torch.tensor([[toks[-1]]]), past_key_values=pkv, use_cache=True)
                pkv = out.past_key_values
                rows.append(out.logits[0, -1])
                toks.append(int(rows[-1].argmax()))
        return toks, torch.stack(rows), state

    # 1. stock transformers in float32: the yardstick (recorded, not fatal: the float64 goldens matter more)
    y32, g32_tokens, f32_error = {}, [], None
    try:
        m32, _ = build(torch.float32)
        note(f"f32 model: attention {m32.config._attn_implementation}")
        y32 = run_acts(m32)
        g32_tokens, _, _ = cached_decode(m32)
        note(f"f32 greedy {g32_tokens}")
        del m32
    except Exception as e:
        f32_error = repr(e)
        note(f"WARNING: the stock float32 run failed ({f32_error}); no yardstick")

    # 2. float64 throughout
    notes = []
    f64_patch(mq, notes)
    for n in notes:
        note("patch", n)
    m64, cfg64 = build(F64)
    rot = m64.model.rotary_emb
    dim = rot.inv_freq.shape[-1] * 2
    base = cfg64.rope_parameters["rope_theta"]
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(F64) / dim))
    dinv = float((inv.to(torch.float32).to(F64) - rot.inv_freq.to(F64)).abs().max())
    note(f"rotary: {dim} rotating dims, |round_f32(f64 inv_freq) - transformers'| max {dinv:.3e}")
    assert dinv <= 1e-7 * float(inv.abs().max()), dinv
    rot.inv_freq = inv
    if hasattr(rot, "original_inv_freq"):
        rot.original_inv_freq = inv.clone()

    class NotFloat64(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bad, self.ops = {}, 0

        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.ops += 1
            for t in tree_flatten((args, kwargs, out))[0]:
                if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != F64:
                    k = f"{func}:{t.dtype}"
                    self.bad[k] = self.bad.get(k, 0) + 1
            return out

    watch = NotFloat64()
    with watch:
        y64 = run_acts(m64)
        c0 = dict(CALLS)
        greedy, rows, state = cached_decode(m64)
        with torch.no_grad():
            full = m64(torch.tensor([prompt + greedy]), use_cache=False).logits[0]
    note(f"float64 watch: {watch.ops} aten ops, non-float64 floating tensors: {watch.bad or 'none'}")
    note(f"calls of patched functions: prompt forward {c0}, all {dict(CALLS)}")
    ran_both = CALLS.get("torch_chunk_gated_delta_rule", 0) > 0 and CALLS.get("torch_recurrent_gated_delta_rule", 0) > 0
    if watch.bad or not ran_both:  # recorded (golden.json "float64_clean"), loudly, but the run goes on
        note("WARNING: the goldens are NOT clean float64 (see above); do not use them for the 1e-9 test")
    try:
        with torch.no_grad():
            gen = m64.generate(ids, max_new_tokens=N, min_new_tokens=N, do_sample=False)
        gen_tokens = gen[0, T:].tolist()
    except Exception as e:
        gen_tokens = repr(e)
    note(f"f64 greedy {greedy}; generate() {'agrees' if gen_tokens == greedy else gen_tokens}")
    tf = full[T - 1:-1].argmax(-1).tolist()
    srt = torch.sort(full[T - 1:-1], dim=-1).values
    min_gap = float((srt[:, -1] - srt[:, -2]).min())

    # 3. the numpy model (what src/reference/qwen mirrors) against transformers, and the MTP head
    npm = NumpyQwen(eff, s)
    n_acts = {}
    n_logits, n_hn = npm.forward(prompt, 0, npm.new_state(), n_acts)
    hf_final = y64["act.final_norm"].numpy()
    cross = {"logits": float(np.abs(n_logits - y64["logits"].numpy()).max())}
    for k, v in n_acts.items():
        if k in y64:
            cross[k] = float(np.abs(v - y64[k].numpy()).max())
    st = npm.new_state()
    npm.forward(prompt, 0, st)
    for k, v in state.items():
        if k.startswith("state.conv."):
            cross[k] = float(np.abs(st[int(k.split(".")[-1])]["conv"] - v.numpy().T).max())
        elif k.startswith("state.recurrent."):
            cross[k] = float(np.abs(st[int(k.split(".")[-1])]["S"] - v.numpy()).max())
    worst = max(cross.values())
    note(f"numpy model vs transformers float64: max |diff| {worst:.3e} ({max(cross, key=cross.get)})")
    bonus = int(y64["logits"][-1].argmax())
    toks, dl, dh, ph = mtp_drafts(npm, prompt, hf_final, bonus, s["draft_steps"])
    note(f"MTP drafts {toks} after bonus {bonus}")

    g = {"prompt": np.array(prompt, np.int32)}
    for k, v in y64.items():
        g[k] = v.numpy()
    g.update({"greedy": np.array(greedy, np.int32), "greedy_logits": rows.numpy(), "logits_full": full.numpy()})
    for k, v in state.items():
        if not k.startswith("_"):
            g[k] = v.numpy()
    g.update({"mtp.seed_hidden": hf_final[-1], "mtp.draft.tokens": np.array(toks, np.int32),
              "mtp.draft.logits": dl, "mtp.draft.hidden": dh, "mtp.prompt_hidden": ph})
    for k, v in g.items():
        assert v.dtype in (np.float64, np.int32), (k, v.dtype)
    write_safetensors(os.path.join(d, "golden.safetensors"), g,
                      {"source": f"transformers {transformers.__version__} Qwen3.5 float64 (tools/make_qwen_fixtures.py)"})
    y = {k: v.numpy().astype(np.float32) for k, v in y32.items()}
    y["greedy"] = np.array(g32_tokens, np.int32)  # (its step logits would only add size: the tokens say enough)
    write_safetensors(os.path.join(d, "transformers-f32.safetensors"), y,
                      {"source": f"transformers {transformers.__version__} Qwen3.5 stock code, model in float32"})
    yard = {}
    for k, v in y.items():
        if k in g and v.dtype == np.float32:
            ref = g[k]
            e = v.astype(np.float64) - ref
            yard[k] = {"max_abs": float(np.abs(e).max()), "nmse": float((e * e).sum() / max((ref * ref).sum(), 1e-300))}
    worst_f32 = sorted(yard.items(), key=lambda kv: -kv[1]["nmse"])[:3]
    note("f32 yardstick, worst NMSE: " + ", ".join(f"{k} {v['nmse']:.2e} (max abs {v['max_abs']:.2e})" for k, v in worst_f32))
    json.dump({"name": f"{NAME} transformers float32 yardstick", "transformers": transformers.__version__,
               "torch": torch.__version__, "greedy": g32_tokens, "error": f32_error, "vs_float64": yard},
              open(os.path.join(d, "transformers-f32.json"), "w"), indent=1)
    meta = {
        "name": NAME, "spec": s, "transformers": transformers.__version__, "torch": torch.__version__,
        "numpy": np.__version__, "compute_dtype": "float64",
        "source": "transformers Qwen3_5ForCausalLM (eager attention) in torch.float64, float32 casts patched to float64",
        "patches": notes, "patched_calls": dict(CALLS), "float64_watch_ops": watch.ops,
        "float64_clean": not watch.bad and ran_both, "non_float64_ops": watch.bad,
        "prompt": prompt, "bonus_token": bonus, "greedy": greedy, "generate_tokens": gen_tokens,
        "generate_equals_greedy": gen_tokens == greedy, "teacher_forced_argmax_equals_greedy": tf == greedy,
        "greedy_min_top1_gap": min_gap, "f32_greedy": g32_tokens, "f32_greedy_equals_f64": g32_tokens == greedy,
        "f32_yardstick": yard, "f32_error": f32_error,
        "f32_vs_f64_max_abs_logit_err": yard["logits"]["max_abs"] if "logits" in yard else None,
        "numpy_vs_transformers_max_abs": cross, "state_error": state.get("_error"),
        "layout": "MLX: language_model.model.* / language_model.lm_head.* (4-bit affine, group 64: every 2-D "
                  "linear incl. embed_tokens, lm_head, in_proj_a/b, mtp.fc), conv1d.weight [C, K, 1] bf16, "
                  "zero-centred norms stored as 1 + w (bf16), linear_attn.norm.weight as is, A_log F32, dt_bias bf16, "
                  "mtp.* at the root (see docs/QWEN35.md)",
        "activations": "act.attn.i = token mixer output (linear_attn after out_proj, or self_attn after o_proj); "
                       "act.mlp.i = mlp output; act.layer.i = decoder layer output; act.final_norm = final norm "
                       "output; act.gdn.recurrence.i = gated delta rule output o [T, Hv*Dv] (before the gated "
                       "norm); act.gdn.gated_norm.i = RMSNormGated output [T, Hv*Dv] (before out_proj)",
        "logits": "logits[t]: prompt position t (full forward, no cache: chunked rule); logits_full: teacher "
                  "forced over prompt+greedy; greedy_logits[j]: the cached decode's logits that chose greedy[j] "
                  "(row 0 from the cached prefill, rows >= 1 from one-token recurrent steps)",
        "state": "state.conv.i [C, K-1] (transformers layout: the last K-1 raw in_proj_qkv rows, oldest first, "
                 "channel-major) and state.recurrent.i [Hv, Dk, Dv] after the cached prefill of the prompt",
        "mtp": {"tokens": toks, "position_id": T - 1, "steps": s["draft_steps"],
                "source": "this script's float64 numpy implementation (no oracle: transformers drops mtp.*), "
                          "following vLLM qwen3_5_mtp.py Qwen3_5MultiTokenPredictor",
                "note": "hidden fed to the head = the target's post-final-norm hidden (act.final_norm rows, as "
                        "vLLM's target forward returns it); the head runs over prompt rows p = 0..T-1 with token "
                        "p+1 (bonus for p = T-1) at RoPE position p, filling its KV cache; draft j+1 = head(draft j, "
                        "head's own post-mtp.norm hidden) at position T-1+j. mtp.prompt_hidden = the head's "
                        "post-norm hidden over those T rows; mtp.draft.* per draft"},
    }
    json.dump(meta, open(os.path.join(d, "golden.json"), "w"), indent=1)
    open(os.path.join(d, "log.txt"), "w").write("\n".join(lines) + "\n")
    meta["sha256"] = {p: sha(os.path.join(d, p)) for p in ["target/model.safetensors", "golden.safetensors"]}
    json.dump(meta, open(os.path.join(d, "golden.json"), "w"), indent=1)
    os.makedirs(outdir, exist_ok=True)
    size = make_tar(d, os.path.join(outdir, NAME + ".tar.gz"))
    shutil.rmtree(work)
    note(f"wrote {os.path.join(outdir, NAME + '.tar.gz')} ({size} bytes); greedy min top-1 gap {min_gap:.4f}; "
         f"f32 max logit err {meta['f32_vs_f64_max_abs_logit_err']}; f32 greedy == f64: {g32_tokens == greedy}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--selftest", action="store_true", help="numpy-only checks and a numpy-golden fixture")
    args = ap.parse_args()
    if args.selftest:
        selftest(args.outdir)
    else:
        main_device(args.outdir)


if __name__ == "__main__":
    main()
