"""Tiny Gemma 4 family fixtures: an E-series-like target + centroid-head assistant, and a MoE target
(26B-A4B-like) + dense-head assistant, in MLX layout, with float64 goldens from transformers.

Device script: python3 with torch, transformers >= 5.17 (Gemma4, Gemma4Assistant), numpy. No internet, no node,
no safetensors package needed (a small writer is built in). Runs on the CPU in well under a minute.

usage (from the repo root):
    python3 tools/make_gemma4_family_fixtures.py OUTDIR [--only e|moe] [--keep-dirs]
    python3 tools/make_gemma4_family_fixtures.py --selftest     # no transformers needed: packing, writer, checks
Writes OUTDIR/gemma4-family-fixtures.tar.gz (members gemma4-e-tiny/..., gemma4-moe-tiny/...; unpack with
`tar -xzf gemma4-family-fixtures.tar.gz -C test/fixtures`) and OUTDIR/make_gemma4_family_fixtures.log.
Each fixture folder, as test/fixtures/tiny-a:
    target/{config.json,model.safetensors}  assistant/{config.json,model.safetensors}
    golden.json  golden.safetensors (F64, I32 ids)  transformers-f32.json  transformers-f32.safetensors (F32)

What is exported (docs/GEMMA4-FAMILY.md has the sources):
  - MLX layout, affine 4-bit group 64 everywhere a module's input width is a multiple of 64 (mlx-lm's default
    predicate: Linear, Embedding, SwitchLinear), 8-bit group 64 for `router.proj` (mlx-lm gemma4_text.py and mlx-vlm
    gemma4/language.py quant_predicate), written as per-module overrides in config.json `quantization`.
  - MoE experts as MLX's SwitchGLU: transformers' experts.gate_up_proj [E, 2I, H] split into
    experts.switch_glu.gate_proj.weight (rows 0..I-1) and .up_proj.weight (rows I..2I-1), experts.down_proj [E, H, I]
    as experts.switch_glu.down_proj.weight; each quantized per expert along its last axis.
  - KV-shared layers have no k_proj / v_proj / k_norm (transformers does not build them; mlx-lm sanitize drops them).
  - Assistant centroid head: masked_embedding.centroids (Linear) and masked_embedding.token_ordering (I32; MLX casts
    the checkpoint's int64 to int32 in mlx-vlm's sanitize).
Weights are quantized (or rounded to bf16) first and the transformers models then compute with exactly the stored
values (dequantized in float64), as tools/make_tiny_a_fixture.py does.

Goldens (golden.safetensors, F64; the computation is float64 throughout: transformers' Gemma4RMSNorm, rotary tables
and eager-attention softmax patched to float64 as tools/make_f64_goldens.py does, Gemma4TextRouter.forward recompiled
from its own source with its float32 casts rewritten to float64 (f64_source), experts run with the "eager" experts
implementation since grouped_mm has no float64; a TorchDispatchMode checks the direct forwards; every failed check is
logged as "CHECK FAILED: ..." and listed in golden.json `failed_checks`):
  prompt, logits [T, V], logits_full [T+N, V] (teacher-forced over prompt + greedy), greedy (cached generate),
  greedy_logits [N, V] (generate's scores), act.attn.i, act.mlp.i (dense MLP output before its post norm),
  act.layer.i, act.final_norm; E: act.ple_inputs [T, L, P] (combined per-layer inputs), act.ple.i (the gated
  per-layer contribution after post_per_layer_input_norm); MoE: act.router_scores.i [T, E] (router.proj output),
  act.router_weights.i [T, k], act.router_experts.i (I32), act.experts.i (experts output before
  post_feedforward_layernorm_2); drafts: draft.tokens, draft.logits (full vocab as transformers returns it, i.e.
  with the min - 1 fill for the centroid head), draft.hidden, draft.seed_hidden, draft.normed (assistant
  post-norm hidden), centroid head: draft.centroid_logits, draft.selected_tokens (I32, transformers' order);
  shared_kv.{sliding,full}_attention.{keys,values} [kv_heads, T, head_dim].
Scalars MLX multiplies into bf16 activations are set to their bf16 values in the transformers models (embed scale
sqrt(H), per-layer projection scale H^-0.5, per-layer input scale 2^-0.5, router root size H^-0.5): golden.json
`constants` lists each.
"""
import argparse, copy, hashlib, io, json, math, os, shutil, sys, tarfile, time

import numpy as np

T0 = time.time()
LOG = []


def log(s):
    line = f"[{time.time() - T0:6.1f}s] {s}"
    print(line, flush=True)
    LOG.append(line)


# ------------------------------------------------------------------------------------------------ specs
SPECS = {
    # E2B-like: 4 sliding : 1 full, 1 KV head, PLE, the last 4 of 10 layers KV-shared with a double-wide MLP;
    # centroid-head assistant (use_ordered_embeddings). Everything 4-bit (mlx-lm's default for gemma4).
    "gemma4-e-tiny": dict(
        variant="e", vocab=512, hidden=128, inter=128, layers=10, pattern=5, heads=4, kv=1, gkv=None, k_eq_v=False,
        hd=64, ghd=128, window=16, ple=64, kv_shared=4, double_wide=True,
        asst_hidden=64, asst_inter=128, centroids=16, centroid_top_k=4, asst_quant=True,
        group=64, bits=4, prompt_len=24, new_tokens=16, draft_steps=3, seed=4242),
    # 26B-A4B-like: 5 sliding : 1 full, K = V on the full layer with 2 global KV heads, a dense MLP in parallel with
    # 8 experts (top-4), router.proj 8-bit; dense-head assistant.
    "gemma4-moe-tiny": dict(
        variant="moe", vocab=512, hidden=128, inter=192, layers=6, pattern=6, heads=4, kv=2, gkv=2, k_eq_v=True,
        hd=64, ghd=128, window=16, experts=8, top_k=4, moe_inter=64,
        asst_hidden=64, asst_inter=128, asst_quant=True,
        group=64, bits=4, router_bits=8, prompt_len=24, new_tokens=16, draft_steps=3, seed=4343),
}

EMBED_STD = 0.05
FINAL_NORM = 6.0
ROUTER_STD = 2.0  # router.proj weights: scores ~ N(0, 4) so that top-k gaps are clear


# ------------------------------------------------------------------------------- bf16 and MLX affine (copied)
def bf16_round(a):
    """Raw bf16 bits (round to nearest even) of float32(a), as tools/make_tiny_a_fixture.py rounds."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f64(bits):
    b = np.asarray(bits)
    return (np.ascontiguousarray(b.reshape(-1)).astype(np.uint32) << 16).view(np.float32).astype(np.float64).reshape(b.shape)


def bf16_value(x):
    return float(bf16_to_f64(bf16_round(np.array([x], np.float32)))[0])


def quantize(w, group, bits):
    """MLX affine quantization (as tools/make_tiny_a_fixture.py): packed uint32 [out, in*bits/32],
    scales/biases bf16 bits [out, in/group], and the dequantized float64 matrix."""
    out_f, in_f = w.shape
    assert in_f % group == 0, (w.shape, group)
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


def dequantize(packed, s_bits, b_bits, group):
    """Inverse of quantize (as tools/make_f64_goldens.py dequant): w = scales * q + biases, in float64."""
    out_f, pc = packed.shape
    n_groups = s_bits.shape[-1]
    in_f = n_groups * group
    bits = pc * 32 // in_f
    per, mask = 32 // bits, (1 << bits) - 1
    q = np.empty((out_f, pc, per), dtype=np.uint32)
    for j in range(per):
        q[..., j] = (packed >> np.uint32(bits * j)) & np.uint32(mask)
    q = q.reshape(out_f, n_groups, group).astype(np.float64)
    return (bf16_to_f64(s_bits)[..., None] * q + bf16_to_f64(b_bits)[..., None]).reshape(out_f, in_f)


# ------------------------------------------------------------------------------------------ safetensors
_DT = {"BF16": ("<u2", 2), "F32": ("<f4", 4), "F64": ("<f8", 8), "U32": ("<u4", 4), "I32": ("<i4", 4),
       "I64": ("<i8", 8), "U16": ("<u2", 2)}


def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> (dtype, np.ndarray); BF16 arrays are raw uint16 bits. Data in name order, header padded
    with spaces to a multiple of 8 bytes."""
    hdr, blobs, off = {}, [], 0
    if metadata:
        hdr["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        dt, arr = tensors[name]
        np_dt, _ = _DT[dt]
        b = np.ascontiguousarray(arr).astype(np_dt, copy=False).tobytes()
        hdr[name] = {"dtype": dt, "shape": [int(x) for x in arr.shape], "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """name -> (dtype, array); BF16 as raw uint16 bits."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(n))
        body = f.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        np_dt, _ = _DT[v["dtype"]]
        out[k] = (v["dtype"], np.frombuffer(body[a:b], dtype=np_dt).reshape(v["shape"]).copy())
    return out


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


# ----------------------------------------------------------------------------------------- numpy checks
def softmax(v, axis=-1):
    m = v.max(axis=axis, keepdims=True)
    e = np.exp(v - m)
    return e / e.sum(axis=axis, keepdims=True)


def router_orders(scores, k, per_expert_scale):
    """Both documented router conventions from raw scores [T, E]. Returns dict with 'hf' (softmax over all E, top-k,
    renormalise) and 'mlx' (top-k of raw scores, softmax over the k), each (experts sorted by score desc, weights)."""
    order = np.argsort(-scores, axis=-1, kind="stable")[:, :k]
    p = softmax(scores)
    hf_w = np.take_along_axis(p, order, -1)
    hf_w = hf_w / hf_w.sum(-1, keepdims=True)
    mlx_w = softmax(np.take_along_axis(scores, order, -1))
    pes = per_expert_scale[order]
    return {"experts": order, "hf": hf_w * pes, "mlx": mlx_w * pes}


def centroid_head(h, centroids_w, token_ordering, embed, top_k):
    """transformers Gemma4AssistantMaskedEmbedder for one row h: returns (centroid logits, selected token ids in
    transformers' order, selected logits, full logits with the min - 1 fill)."""
    C = centroids_w.shape[0]
    V = embed.shape[0]
    c = centroids_w @ h
    top = np.argsort(-c, kind="stable")[:top_k]
    sel = token_ordering.reshape(C, V // C)[top].reshape(-1)
    lg = embed[sel] @ h
    full = np.full(V, lg.min() - 1.0)
    full[sel] = lg
    return c, sel, lg, full


# ------------------------------------------------------------------------------------------------ selftest
def selftest():
    rng = np.random.default_rng(0)
    for bits in (4, 8):
        w = rng.standard_normal((6, 128)) * 0.1
        packed, sb, bb, deq = quantize(w, 64, bits)
        assert packed.shape == (6, 128 * bits // 32) and sb.shape == (6, 2)
        assert np.array_equal(dequantize(packed, sb, bb, 64), deq)
        # element k of a row: bits `bits*(k % per)` of word k // per, least significant first
        per = 32 // bits
        q = (packed[2, 5 // per] >> np.uint32(bits * (5 % per))) & np.uint32((1 << bits) - 1)
        assert deq[2, 5] == bf16_to_f64(sb[2, 0]) * q + bf16_to_f64(bb[2, 0])
        assert np.abs(deq - w).max() < (0.1 if bits == 4 else 0.01), np.abs(deq - w).max()
    assert bf16_value(2 ** -0.5) == 0.70703125 and bf16_value(math.sqrt(3840)) == 62.0
    assert bf16_value(1536 ** 0.5) == 39.25 and bf16_value(2816 ** -0.5) == 0.018798828125
    # writer round trip
    path = "/tmp/_g4fam_selftest.safetensors"
    t = {"a": ("F64", rng.standard_normal((3, 4))), "b": ("I32", np.arange(5, dtype=np.int32)),
         "c": ("BF16", bf16_round(rng.standard_normal(7))), "d": ("U32", np.arange(6, dtype=np.uint32).reshape(2, 3))}
    write_safetensors(path, t, {"format": "mlx"})
    r = read_safetensors(path)
    for k, (dt, a) in t.items():
        assert r[k][0] == dt and np.array_equal(r[k][1], a), k
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
    assert n % 8 == 0
    os.remove(path)
    # router orders agree mathematically
    s = rng.standard_normal((5, 8)) * 2
    ro = router_orders(s, 4, rng.uniform(0.5, 1.5, 8))
    assert np.abs(ro["hf"] - ro["mlx"]).max() < 1e-12
    # centroid head: the selected tokens are those of the top clusters, the rest hold min - 1
    V, C, H = 64, 8, 16
    order = rng.permutation(V)
    emb, cw, h = rng.standard_normal((V, H)), rng.standard_normal((C, H)), rng.standard_normal(H)
    c, sel, lg, full = centroid_head(h, cw, order, emb, 2)
    top = np.argsort(-c)[:2]
    assert set(sel.tolist()) == set(order.reshape(C, V // C)[top].reshape(-1).tolist())
    assert (np.delete(full, sel) == lg.min() - 1).all() and full.argmax() in sel
    # the float32 -> float64 source rewrite of the router (the spellings transformers uses for its casts)
    src = ("def forward(self, x):\n    s = self.proj(x).float()\n    p = softmax(s, dim=-1, dtype=torch.float32)\n"
           "    w = p.to(torch.float)\n    keep = x.to(torch.float64), torch.float16, torch.float_power\n    return w\n")
    new, n = f64_source(src)
    assert n == 3, (n, new)
    assert "float32" not in new and ".float()" not in new and "torch.float)" not in new, new
    assert "torch.float16" in new and "torch.float_power" in new and new.count("torch.float64") == 4, new
    assert f64_source(new) == (new, 0)
    # expert split (MLX sanitize: gate = rows 0..I-1 of gate_up_proj, up = rows I..2I-1)
    gu = rng.standard_normal((3, 2 * 4, 64))
    g, u = split_gate_up(gu)
    assert np.array_equal(np.concatenate([g, u], 1), gu)
    try:
        import torch
    except Exception as e:  # the rest needs torch
        log(f"selftest: no torch ({e!r}); export mapping not tested")
        torch = None
    if torch is not None:
        selftest_export(torch, rng)
    log("selftest ok")


def selftest_export(torch, rng):
    """export() on a stand-in module with the family's parameter names: names, shapes, overrides, and that the
    in-place values equal the stored ones dequantized."""
    nn = torch.nn

    def put(root, path, t, buffer=False):
        *mods, leaf = path.split(".")
        m = root
        for x in mods:
            if not hasattr(m, x):
                m.add_module(x, nn.Module())
            m = getattr(m, x)
        if buffer:
            m.register_buffer(leaf, t)
        else:
            m.register_parameter(leaf, nn.Parameter(t, requires_grad=False))

    V, H, E, I, P, L = 128, 64, 8, 64, 64, 2
    root = nn.Module()
    f = lambda *sh: torch.from_numpy(rng.standard_normal(sh) * 0.1)  # noqa: E731
    put(root, "model.embed_tokens.weight", f(V, H))
    put(root, "model.embed_tokens_per_layer.weight", f(V, L * P))
    put(root, "model.layers.0.router.proj.weight", f(E, H))
    put(root, "model.layers.0.router.scale", f(H))
    put(root, "model.layers.0.router.per_expert_scale", f(E))
    put(root, "model.layers.0.experts.gate_up_proj", f(E, 2 * I, H))
    put(root, "model.layers.0.experts.down_proj", f(E, H, I))
    put(root, "model.layers.0.layer_scalar", torch.ones(1, dtype=torch.float64), buffer=True)
    put(root, "masked_embedding.token_ordering", torch.from_numpy(rng.permutation(V)), buffer=True)
    s = dict(group=64, bits=4, router_bits=8)
    path = "/tmp/_g4fam_export.safetensors"
    cfg, lst = export(root, "language_model.", s, True, path, {"model_type": "x"}, torch)
    r = read_safetensors(path)
    os.remove(path)
    pre = "language_model.model.layers.0."
    assert cfg["quantization"][pre + "router.proj"] == {"group_size": 64, "bits": 8}, cfg["quantization"]
    assert len([k for k in cfg["quantization"] if isinstance(cfg["quantization"][k], dict)]) == 1
    assert r[pre + "router.proj.weight"][1].shape == (E, H // 4)
    assert r[pre + "experts.switch_glu.gate_proj.weight"][1].shape == (E, I, H // 8)
    assert r[pre + "experts.switch_glu.gate_proj.scales"][1].shape == (E, I, H // 64)
    assert r[pre + "experts.switch_glu.down_proj.weight"][1].shape == (E, H, I // 8)
    assert r["language_model.model.embed_tokens_per_layer.weight"][1].shape == (V, L * P // 8)
    assert r[pre + "router.scale"][0] == "BF16" and r[pre + "layer_scalar"][0] == "BF16"
    assert r["language_model.masked_embedding.token_ordering"][0] == "I32"
    assert pre + "experts.gate_up_proj" not in r
    # the module now holds exactly the stored values
    def deq(mod, lead):
        w, sb, bb = (r[mod + x][1] for x in (".weight", ".scales", ".biases"))
        return dequantize(w.reshape(-1, w.shape[-1]), sb.reshape(-1, sb.shape[-1]), bb.reshape(-1, bb.shape[-1]), 64).reshape(lead + (-1,))
    gu = root.model.layers[0].experts.gate_up_proj.detach().numpy() if isinstance(root.model.layers, nn.ModuleList) else \
        getattr(root.model.layers, "0").experts.gate_up_proj.detach().numpy()
    g = deq(pre + "experts.switch_glu.gate_proj", (E, I))
    u = deq(pre + "experts.switch_glu.up_proj", (E, I))
    assert np.array_equal(gu, np.concatenate([g, u], 1))
    dn = getattr(root.model.layers, "0").experts.down_proj.detach().numpy()
    assert np.array_equal(dn, deq(pre + "experts.switch_glu.down_proj", (E, H)))
    rs = getattr(root.model.layers, "0").router.scale.detach().numpy()
    assert np.array_equal(rs, bf16_to_f64(r[pre + "router.scale"][1]))
    log(f"selftest: export mapping ok ({len(lst)} tensors, torch {torch.__version__})")


def split_gate_up(gu):
    I = gu.shape[1] // 2
    return gu[:, :I, :], gu[:, I:, :]


# ------------------------------------------------------------------------------------------- configs
def layer_types(n, pattern):
    t = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]
    t[-1] = "full_attention"
    return t


ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}}


def target_text_config(s):
    c = dict(
        vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["inter"], num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"], num_key_value_heads=s["kv"], head_dim=s["hd"], global_head_dim=s["ghd"],
        num_global_key_value_heads=s["gkv"], attention_k_eq_v=s["k_eq_v"], sliding_window=s["window"],
        layer_types=layer_types(s["layers"], s["pattern"]), rms_norm_eps=1e-6, final_logit_softcapping=30.0,
        hidden_activation="gelu_pytorch_tanh", max_position_embeddings=4096, tie_word_embeddings=True,
        rope_parameters=copy.deepcopy(ROPE),
        hidden_size_per_layer_input=s.get("ple", 0), vocab_size_per_layer_input=s["vocab"] if s.get("ple") else 0,
        num_kv_shared_layers=s.get("kv_shared", 0), use_double_wide_mlp=bool(s.get("double_wide", False)),
        enable_moe_block=s["variant"] == "moe", num_experts=s.get("experts"), top_k_experts=s.get("top_k"),
        moe_intermediate_size=s.get("moe_inter"),
    )
    return c


def assistant_text_config(s):
    types = ["sliding_attention"] * 3 + ["full_attention"]
    return dict(
        vocab_size=s["vocab"], hidden_size=s["asst_hidden"], intermediate_size=s["asst_inter"], num_hidden_layers=4,
        num_attention_heads=s["heads"], num_key_value_heads=s["kv"], head_dim=s["hd"], global_head_dim=s["ghd"],
        num_global_key_value_heads=s["gkv"], attention_k_eq_v=s["k_eq_v"], sliding_window=s["window"],
        layer_types=types, rms_norm_eps=1e-6, final_logit_softcapping=None, hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=4096, tie_word_embeddings=True, rope_parameters=copy.deepcopy(ROPE),
        hidden_size_per_layer_input=0, vocab_size_per_layer_input=0, num_kv_shared_layers=4,
        use_double_wide_mlp=False, enable_moe_block=False,
    )


# ------------------------------------------------------------------------------------------ weights
def fill_random(model, rng, torch):
    """make_tiny_a_fixture.py's scales, plus: router.scale 1 + 0.25 N, per_expert_scale U(0.5, 1.5), router.proj N * 2,
    token_ordering a random permutation of the vocabulary."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("model.norm.weight"):
                v = FINAL_NORM * (1.0 + 0.25 * rng.standard_normal(p.shape))
            elif name.endswith("norm.weight") or name.endswith("router.scale"):
                v = 1.0 + 0.25 * rng.standard_normal(p.shape)
            elif name.endswith("router.per_expert_scale"):
                v = rng.uniform(0.5, 1.5, size=p.shape)
            elif name.endswith("router.proj.weight"):
                v = ROUTER_STD * rng.standard_normal(p.shape)
            elif "embed_tokens" in name:
                v = EMBED_STD * rng.standard_normal(p.shape)
            else:
                v = rng.standard_normal(p.shape) / math.sqrt(p.shape[-1])
            p.copy_(torch.from_numpy(np.asarray(v, dtype=np.float64)).to(p.dtype))
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.copy_(torch.from_numpy(rng.uniform(0.6, 1.2, size=tuple(b.shape))))
            elif name.endswith("token_ordering"):
                b.copy_(torch.from_numpy(rng.permutation(b.shape[0]).astype(np.int64)))


def export(model, prefix, s, quant, path, cfg_top, torch):
    """Quantize / round every weight in place (so transformers computes with the stored values) and write the MLX
    safetensors. Returns config.json's dict (with `quantization` overrides) and a list of (name, dtype, shape)."""
    group, bits = s["group"], s["bits"]
    qcfg = {"group_size": group, "bits": bits, "mode": "affine"}
    tensors = {}
    params = dict(model.named_parameters())
    params.update({k: v for k, v in model.named_buffers() if k.endswith("layer_scalar") or k.endswith("token_ordering")})

    def put_q(mod, arr2d, nbits, lead=None):
        packed, sb, bb, deq = quantize(arr2d, group, nbits)
        if lead is not None:  # [E, out, in] experts: quantized per row along the last axis
            packed = packed.reshape(lead + packed.shape[-1:])
            sb, bb = sb.reshape(lead + sb.shape[-1:]), bb.reshape(lead + bb.shape[-1:])
        tensors[mod + ".weight"] = ("U32", packed)
        tensors[mod + ".scales"] = ("BF16", sb)
        tensors[mod + ".biases"] = ("BF16", bb)
        if nbits != bits:
            qcfg[mod] = {"group_size": group, "bits": nbits}
        return deq

    with torch.no_grad():
        for name, p in params.items():
            if name == "lm_head.weight":
                continue  # tied to model.embed_tokens
            if name.endswith("token_ordering"):
                tensors[prefix + name] = ("I32", p.detach().cpu().numpy().astype(np.int32))
                continue
            arr = p.detach().cpu().numpy().astype(np.float64)
            if name.endswith("experts.gate_up_proj"):
                base = prefix + name[: -len(".gate_up_proj")] + ".switch_glu"
                E, I2, Hh = arr.shape
                g, u = split_gate_up(arr)
                dg = put_q(base + ".gate_proj", g.reshape(-1, Hh), bits, (E, I2 // 2)) if quant else None
                du = put_q(base + ".up_proj", u.reshape(-1, Hh), bits, (E, I2 // 2)) if quant else None
                if quant:
                    p.copy_(torch.from_numpy(np.concatenate([dg.reshape(E, -1, Hh), du.reshape(E, -1, Hh)], 1)))
                else:
                    raise ValueError("unquantized experts export not implemented")
                continue
            if name.endswith("experts.down_proj"):
                base = prefix + name[: -len(".down_proj")] + ".switch_glu.down_proj"
                E, Hh, I = arr.shape
                d = put_q(base, arr.reshape(-1, I), bits, (E, Hh))
                p.copy_(torch.from_numpy(d.reshape(E, Hh, I)))
                continue
            if quant and arr.ndim == 2 and arr.shape[1] % group == 0:
                mod = prefix + name[: -len(".weight")]
                nb = s.get("router_bits", bits) if name.endswith("router.proj.weight") else bits
                p.copy_(torch.from_numpy(put_q(mod, arr, nb)))
            else:
                b16 = bf16_round(arr.astype(np.float32))
                tensors[prefix + name] = ("BF16", b16)
                p.copy_(torch.from_numpy(bf16_to_f64(b16).reshape(arr.shape)))
    write_safetensors(path, tensors, {"format": "mlx"})
    cfg = dict(cfg_top)
    if quant:
        cfg["quantization"] = qcfg
        cfg["quantization_config"] = qcfg
    return cfg, [(k, v[0], list(v[1].shape)) for k, v in sorted(tensors.items())]


# -------------------------------------------------------------------------------- float64 patches (copied)
# transformers' float32 casts as they may be written in a forward's source, and their float64 spelling. Order
# matters: `torch.float32` before the bare `torch.float` (which the lookahead keeps off `torch.float64` / `float16`).
F32_CASTS = (
    (r"\.float\(\)", ".to(torch.float64)"),
    (r"\btorch\.float32\b", "torch.float64"),
    (r"\btorch\.float(?![0-9_a-zA-Z])", "torch.float64"),
)


def f64_source(src):
    """A function's source with every float32 cast rewritten to float64: (new source, number of casts rewritten).
    Used on transformers' own Gemma4TextRouter.forward, so the golden router is the library's code, only in float64."""
    import re
    n = 0
    for pat, rep in F32_CASTS:
        src, k = re.subn(pat, rep, src)
        n += k
    return src, n


def f64_method(cls, name, namespace):
    """cls.name recompiled from its own source with f64_source, in `namespace` (the defining module's globals).
    Returns (function, casts rewritten, rewritten source)."""
    import inspect, textwrap
    src = textwrap.dedent(inspect.getsource(getattr(cls, name)))
    new, n = f64_source(src)
    scope = {}
    exec(compile(new, f"<{cls.__name__}.{name} float64>", "exec"), namespace, scope)
    return scope[name], n, new


def install_f64_patches(mg, torch, F64):
    """tools/make_f64_goldens.py's patches: Gemma4RMSNorm, the rotary forward and eager attention in float64; and
    Gemma4TextRouter.forward recompiled from its own source with its float32 casts made float64 (transformers 5.17
    computes softmax / top-k / renormalisation in float32 even in a float64 model)."""
    calls = {"attn": 0, "router": 0, "router_casts": 0}

    def rms_norm_f64(self, hidden_states):
        ms = hidden_states.pow(2).mean(-1, keepdim=True) + self.eps
        out = hidden_states * torch.pow(ms, -0.5)
        if self.with_scale:
            out = out * self.weight
        return out

    def rotary_forward_f64(self, x, position_ids, layer_type=None):
        inv_freq = getattr(self, f"{layer_type}_inv_freq")
        assert inv_freq.dtype == F64
        scaling = getattr(self, f"{layer_type}_attention_scaling")
        freqs = position_ids.to(F64)[:, :, None] * inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        if scaling != 1.0:
            cos, sin = cos * scaling, sin * scaling
        return cos.to(x.dtype), sin.to(x.dtype)

    def eager_attention_f64(module, query, key, value, attention_mask, dropout=0.0, scaling=None, softcap=None,
                            **kwargs):
        calls["attn"] += 1
        if scaling is None:
            scaling = module.head_dim ** -0.5
        ks = mg.repeat_kv(key, module.num_key_value_groups)
        vs = mg.repeat_kv(value, module.num_key_value_groups)
        w = torch.matmul(query, ks.transpose(2, 3)) * scaling
        if softcap is not None:
            w = torch.tanh(w / softcap) * softcap
        if attention_mask is not None:
            if attention_mask.dtype == torch.bool:
                w = w.masked_fill(~attention_mask, float("-inf"))
            else:
                w = w + attention_mask
        w = torch.softmax(w, dim=-1)
        return torch.matmul(w, vs).transpose(1, 2).contiguous(), w

    router_f64, n, src = f64_method(mg.Gemma4TextRouter, "forward", vars(mg))
    calls["router_casts"] = n
    log(f"Gemma4TextRouter.forward: {n} float32 cast(s) rewritten to float64" + (
        "" if n else " (none found: the non-float64 op check decides whether the router is float64)"))
    if n:
        for line in src.splitlines():
            if "float64" in line:
                log(f"    {line.strip()}")

    def router_forward(self, *a, **k):
        calls["router"] += 1
        return router_f64(self, *a, **k)

    saved = (mg.Gemma4RMSNorm.forward, mg.Gemma4TextRotaryEmbedding.forward, mg.eager_attention_forward,
             mg.Gemma4TextRouter.forward)
    mg.Gemma4RMSNorm.forward = rms_norm_f64
    mg.Gemma4TextRotaryEmbedding.forward = rotary_forward_f64
    mg.eager_attention_forward = eager_attention_f64
    mg.Gemma4TextRouter.forward = router_forward

    def undo():  # the next fixture's f32 yardstick must run the stock code again
        (mg.Gemma4RMSNorm.forward, mg.Gemma4TextRotaryEmbedding.forward, mg.eager_attention_forward,
         mg.Gemma4TextRouter.forward) = saved
    return calls, undo


def inv_freq_f64(params, half, torch, F64):
    base = float(params["rope_theta"])
    hd = 2 * half
    if params["rope_type"] == "default":
        return 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.int64).to(F64) / hd))
    if params["rope_type"] == "proportional":
        angles = int(params.get("partial_rotary_factor", 1.0) * hd // 2)
        rot = 1.0 / (base ** (torch.arange(0, 2 * angles, 2, dtype=torch.int64).to(F64) / hd))
        return torch.cat((rot, torch.zeros(hd // 2 - angles, dtype=F64))) / float(params.get("factor", 1.0))
    raise ValueError(params["rope_type"])


def patch_rotary_buffers(rot, torch, F64):
    for lt in list(rot.rope_type.keys()):
        name = f"{lt}_inv_freq"
        old = getattr(rot, name)
        new = inv_freq_f64(rot.config.rope_parameters[lt], old.shape[-1], torch, F64).to(old.device)
        d = (new.to(torch.float32).to(F64) - old.to(F64)).abs().max().item()
        assert d <= 1e-7 * max(new.abs().max().item(), 1e-30), (lt, d)
        setattr(rot, name, new)


def set_eager(model, log_name):
    """Eager attention and eager experts (transformers' grouped_mm has no float64)."""
    for fn, arg in (("set_attn_implementation", "eager"), ("set_experts_implementation", "eager")):
        try:
            getattr(model, fn)(arg)
        except Exception as e:
            log(f"{log_name}: {fn} failed ({e!r}); setting the configs")
            key = "_attn_implementation" if "attn" in fn else "_experts_implementation"
            for c in {id(x): x for x in (model.config, model.config.get_text_config(), model.model.config)}.values():
                try:
                    setattr(c, key, "eager")
                except Exception as e2:
                    log(f"  could not set {key} on {type(c).__name__}: {e2!r}")
    try:
        log(f"{log_name}: experts implementation {model.get_experts_implementation()}")
    except Exception:
        pass


# --------------------------------------------------------------------------------------------- run one
def build(name, s, torch, tf):
    from transformers import Gemma4TextConfig, Gemma4ForCausalLM
    from transformers.models.gemma4_assistant import Gemma4AssistantConfig, Gemma4AssistantForCausalLM
    F64 = torch.float64
    rng = np.random.default_rng(s["seed"])
    torch.manual_seed(s["seed"])
    tc = target_text_config(s)
    target = Gemma4ForCausalLM(Gemma4TextConfig(**tc)).to(F64).eval()
    fill_random(target, rng, torch)
    ac = assistant_text_config(s)
    akw = dict(text_config=copy.deepcopy(ac), backbone_hidden_size=s["hidden"],
               use_ordered_embeddings=s["variant"] == "e")
    if s["variant"] == "e":
        akw.update(num_centroids=s["centroids"], centroid_intermediate_top_k=s["centroid_top_k"])
    asst = Gemma4AssistantForCausalLM(Gemma4AssistantConfig(**akw)).to(F64).eval()
    fill_random(asst, rng, torch)
    return target, asst, tc, ac, akw


def set_mlx_constants(target, s, torch):
    """The scalars MLX multiplies into bf16 activations, as bf16 values (docs/GEMMA4-FAMILY.md)."""
    H = s["hidden"]
    consts = {}
    es = bf16_value(math.sqrt(H))
    target.model.embed_tokens.embed_scale.fill_(es)
    consts["embed_scale"] = {"exact": math.sqrt(H), "used": es}
    if s.get("ple"):
        m = target.model
        for attr, exact in (("per_layer_input_scale", 2 ** -0.5), ("per_layer_model_projection_scale", H ** -0.5)):
            if not hasattr(m, attr):
                raise AttributeError(f"Gemma4TextModel has no {attr}: transformers changed, update this script")
            setattr(m, attr, bf16_value(exact))
            consts[attr] = {"exact": exact, "used": getattr(m, attr)}
        pes = m.embed_tokens_per_layer.embed_scale
        v = bf16_value(math.sqrt(s["ple"]))
        pes.fill_(v)
        consts["embed_tokens_per_layer_scale"] = {"exact": math.sqrt(s["ple"]), "used": v}
    if s["variant"] == "moe":
        v = bf16_value(H ** -0.5)
        for layer in target.model.layers:
            if not hasattr(layer.router, "scalar_root_size"):
                raise AttributeError("Gemma4TextRouter has no scalar_root_size: update this script")
            layer.router.scalar_root_size = v
        consts["router_root_size"] = {"exact": H ** -0.5, "used": v,
                                      "note": "MLX multiplies it into router.scale first (bf16 product); transformers multiplies (x * scale) * root"}
    return consts


def hooks_for(target, s, cap, torch):
    hs = []

    def put(key):
        return lambda m, a, o: cap.__setitem__(key, (o[0] if isinstance(o, tuple) else o).detach().clone())

    for i, layer in enumerate(target.model.layers):
        hs.append(layer.self_attn.register_forward_hook(put(f"attn.{i}")))
        hs.append(layer.mlp.register_forward_hook(put(f"mlp.{i}")))
        hs.append(layer.register_forward_hook(put(f"layer.{i}")))
        if s.get("ple"):
            hs.append(layer.post_per_layer_input_norm.register_forward_hook(put(f"ple.{i}")))
        if s["variant"] == "moe":
            hs.append(layer.experts.register_forward_hook(put(f"experts.{i}")))
            hs.append(layer.router.proj.register_forward_hook(put(f"router_scores.{i}")))
            hs.append(layer.pre_feedforward_layernorm_2.register_forward_hook(put(f"experts_in.{i}")))

            def rt(m, a, o, i=i):
                cap[f"router_weights.{i}"] = o[1].detach().clone()
                cap[f"router_experts.{i}"] = o[2].detach().clone()
            hs.append(layer.router.register_forward_hook(rt))
    hs.append(target.model.norm.register_forward_hook(put("final_norm")))
    if s.get("ple"):
        tm = target.model
        orig = tm.project_per_layer_inputs

        def proj(*a, **k):
            r = orig(*a, **k)
            cap["ple_inputs"] = r.detach().clone()
            return r
        tm.project_per_layer_inputs = proj

        class _Undo:
            def remove(self):
                del tm.project_per_layer_inputs
        hs.append(_Undo())
    return hs


def compute(target, asst, s, torch, watch, dtype):
    """One golden set (model dtype `dtype`). Returns (tensors name -> np array, meta)."""
    T, V, N = s["prompt_len"], s["vocab"], s["new_tokens"]
    prompt = [(7 * i + 1 + 978) % V for i in range(T)]
    ids = torch.tensor([prompt])
    g, meta = {}, {}
    cap = {}
    hs = hooks_for(target, s, cap, torch)
    with torch.no_grad(), watch():
        out = target(ids, use_cache=False, return_shared_kv_states=True)
    for h in hs:
        h.remove()
    g["prompt"] = np.array(prompt, dtype=np.int32)
    g["logits"] = out.logits[0]
    for k, v in cap.items():
        if k.startswith("experts_in."):
            continue
        t = v[0] if v.dim() == 3 and v.shape[0] == 1 else v
        if k == "ple_inputs":
            t = v[0]
        g["act." + k] = t.to(torch.int32).numpy() if k.startswith("router_experts") else t
    if s["variant"] == "moe":
        checks = numpy_moe_checks(target, cap, s, torch)
        meta["moe_checks"] = checks

    with torch.no_grad():
        gen = target.generate(ids, max_new_tokens=N, do_sample=False, min_new_tokens=N, output_logits=True,
                              return_dict_in_generate=True)
    greedy = gen.sequences[0, T:].tolist()
    g["greedy"] = np.array(greedy, dtype=np.int32)
    # raw logits of each cached decode step (scores would carry min_new_tokens' -inf on EOS)
    g["greedy_logits"] = torch.stack([sc[0] for sc in gen.logits]).to(dtype)
    full = torch.tensor([prompt + greedy])
    with torch.no_grad(), watch():
        lf = target(full, use_cache=False).logits[0]
    g["logits_full"] = lf
    meta["teacher_forced_argmax_equals_greedy"] = lf[T - 1:-1].argmax(-1).tolist() == greedy
    srt = torch.sort(lf[T - 1:-1], dim=-1).values
    meta["greedy_min_top1_gap"] = float((srt[:, -1] - srt[:, -2]).min())
    meta["greedy_logits_vs_teacher_forced_max_abs"] = float((g["greedy_logits"] - lf[T - 1:-1]).abs().max())

    # drafts: the assistant called directly, as tools/make_tiny_a_fixture.py does
    h_last = cap["final_norm"][:, -1:]
    bonus = int(out.logits[0, -1].argmax())
    kv = {k: (v[0], v[1]) for k, v in out.shared_kv_states.items()}
    acap = {}
    ah = [asst.model.norm.register_forward_hook(lambda m, a, o: acap.__setitem__("normed", o.detach().clone()))]
    if asst.config.use_ordered_embeddings:
        ah.append(asst.masked_embedding.centroids.register_forward_hook(
            lambda m, a, o: acap.__setitem__("centroid_logits", o.detach().clone())))
    drafts, dl, dh, dn, dc, dsel = [], [], [], [], [], []
    tok, h = bonus, h_last
    with torch.no_grad(), watch():
        for _ in range(s["draft_steps"]):
            emb = target.model.embed_tokens(torch.tensor([[tok]]))
            ao = asst(inputs_embeds=torch.cat([emb, h], -1), position_ids=torch.tensor([[T]]), shared_kv_states=kv,
                      use_cache=False)
            tok = int(ao.logits[0, -1].argmax())
            h = ao.last_hidden_state
            drafts.append(tok)
            dl.append(ao.logits[0, -1])
            dh.append(h[0, -1])
            dn.append(acap["normed"][0, -1])
            if "centroid_logits" in acap:
                c = acap["centroid_logits"][0, -1]
                dc.append(c)
                top = torch.topk(c, k=asst.config.centroid_intermediate_top_k).indices
                C = asst.config.num_centroids
                dsel.append(asst.masked_embedding.token_ordering.long().view(C, -1)[top].reshape(-1))
    for x in ah:
        x.remove()
    g["draft.tokens"] = np.array(drafts, dtype=np.int32)
    g["draft.logits"] = torch.stack(dl)
    g["draft.hidden"] = torch.stack(dh)
    g["draft.normed"] = torch.stack(dn)
    g["draft.seed_hidden"] = h_last[0, -1]
    if dc:
        g["draft.centroid_logits"] = torch.stack(dc)
        g["draft.selected_tokens"] = torch.stack(dsel).to(torch.int32).numpy()
        meta["centroid_checks"] = numpy_centroid_checks(asst, g, torch)
    for k, (kk, vv) in kv.items():
        g[f"shared_kv.{k}.keys"] = kk[0].contiguous()
        g[f"shared_kv.{k}.values"] = vv[0].contiguous()

    # assisted generation with the MTP drafter (must reproduce classic greedy)
    rounds, mtp, mtp_err = [], [], None
    try:
        from transformers.generation import candidate_generator as cg
        orig = cg.SinglePositionMultiTokenCandidateGenerator.get_candidates

        def spy(self, input_ids, *a, **kw):
            r = orig(self, input_ids, *a, **kw)
            rounds.append({"context_len": int(input_ids.shape[1]), "drafts": r[0][0, input_ids.shape[1]:].tolist()})
            return r
        cg.SinglePositionMultiTokenCandidateGenerator.get_candidates = spy
        asst.generation_config.num_assistant_tokens = s["draft_steps"]
        asst.generation_config.num_assistant_tokens_schedule = "constant"
        try:
            with torch.no_grad():
                m = target.generate(ids, assistant_model=asst, max_new_tokens=N, do_sample=False, min_new_tokens=N,
                                    num_assistant_tokens=s["draft_steps"], num_assistant_tokens_schedule="constant")
            mtp = m[0, T:].tolist()
        finally:
            cg.SinglePositionMultiTokenCandidateGenerator.get_candidates = orig
    except Exception as e:  # recorded, not fatal
        mtp_err = repr(e)

    out_np = {}
    for k, v in g.items():
        if isinstance(v, torch.Tensor):
            assert v.dtype == dtype, (k, v.dtype)
            v = v.detach().contiguous().numpy()
        out_np[k] = np.ascontiguousarray(v)
    meta.update({"prompt": prompt, "bonus_token": bonus, "greedy": greedy, "mtp_tokens": mtp, "mtp_error": mtp_err,
                 "mtp_equals_greedy": mtp == greedy, "mtp_rounds": rounds, "draft_tokens": drafts})
    return out_np, meta


def numpy_moe_checks(target, cap, s, torch):
    """Router orders and experts recomputed in numpy from the captured inputs (documents and verifies the math)."""
    res = {"layers": []}
    k = s["top_k"]
    for i, layer in enumerate(target.model.layers):
        sc = cap[f"router_scores.{i}"].reshape(-1, s["experts"]).double().numpy()
        pes = layer.router.per_expert_scale.detach().double().numpy()
        ro = router_orders(sc, k, pes)
        hf_idx = cap[f"router_experts.{i}"].reshape(-1, k).numpy()
        hf_w = cap[f"router_weights.{i}"].reshape(-1, k).double().numpy()
        same_sets = all(set(a) == set(b) for a, b in zip(hf_idx.tolist(), ro["experts"].tolist()))
        # align our weights to transformers' index order
        ours = np.array([[ro["hf"][r, list(ro["experts"][r]).index(e)] for e in hf_idx[r]] for r in range(len(hf_idx))])
        ours_mlx = np.array([[ro["mlx"][r, list(ro["experts"][r]).index(e)] for e in hf_idx[r]] for r in range(len(hf_idx))])
        srt = -np.sort(-sc, axis=-1)
        # experts recomputed from pre_feedforward_layernorm_2's output
        x = cap[f"experts_in.{i}"].reshape(-1, s["hidden"]).double().numpy()
        gu = layer.experts.gate_up_proj.detach().double().numpy()
        dn = layer.experts.down_proj.detach().double().numpy()
        y = np.zeros_like(x)
        for r in range(x.shape[0]):
            for j, e in enumerate(hf_idx[r]):
                a = gu[e] @ x[r]
                I = a.shape[0] // 2
                gg = a[:I]
                gel = 0.5 * gg * (1 + np.tanh(math.sqrt(2 / math.pi) * (gg + 0.044715 * gg ** 3)))
                y[r] += hf_w[r, j] * (dn[e] @ (gel * a[I:]))
        ex = cap[f"experts.{i}"].reshape(-1, s["hidden"]).double().numpy()
        res["layers"].append({
            "same_expert_sets": bool(same_sets),
            "weights_hf_order_max_abs": float(np.abs(ours - hf_w).max()),
            "weights_mlx_order_max_abs": float(np.abs(ours_mlx - hf_w).max()),
            "min_topk_score_gap": float((srt[:, k - 1] - srt[:, k]).min()),
            "experts_numpy_max_abs": float(np.abs(y - ex).max()),
        })
    res["all_same_sets"] = all(l["same_expert_sets"] for l in res["layers"])
    return res


def numpy_centroid_checks(asst, g, torch):
    emb = asst.model.embed_tokens.weight.detach().double().numpy()
    cw = asst.masked_embedding.centroids.weight.detach().double().numpy()
    order = asst.masked_embedding.token_ordering.long().numpy()
    k = asst.config.centroid_intermediate_top_k
    out = []
    for st in range(len(g["draft.tokens"])):
        h = g["draft.normed"][st].double().numpy()
        c, sel, lg, full = centroid_head(h, cw, order, emb, k)
        tl = g["draft.logits"][st].double().numpy()
        out.append({"selected_equal": bool(np.array_equal(sel, g["draft.selected_tokens"][st])),
                    "logits_max_abs": float(np.abs(full - tl).max()),
                    "fill": float(lg.min() - 1.0), "argmax_in_selected": bool(int(tl.argmax()) in set(sel.tolist()))})
    return out


def to_f32_copy(model, torch):
    m = copy.deepcopy(model).to(torch.float32)
    return m


def run_fixture(name, s, outroot, torch, tf):
    from transformers.models.gemma4 import modeling_gemma4 as mg
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    F64 = torch.float64
    d = os.path.join(outroot, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d + "/target")
    os.makedirs(d + "/assistant")
    log(f"{name}: building ({s['variant']})")
    target, asst, tc, ac, akw = build(name, s, torch, tf)
    consts = set_mlx_constants(target, s, torch)
    for i, layer in enumerate(target.model.layers):
        a = layer.self_attn
        log(f"  layer {i}: {tc['layer_types'][i][:7]} shared={getattr(a, 'is_kv_shared_layer', None)} "
            f"store_kv={getattr(a, 'store_full_length_kv', None)} k_proj={hasattr(a, 'k_proj') and a.k_proj is not None} "
            f"mlp={tuple(layer.mlp.gate_proj.weight.shape)}")

    tjson = dict(tc, model_type="gemma4_text")
    top = {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"], "text_config": tjson,
           "tie_word_embeddings": True}
    tcfg, tlist = export(target, "language_model.", s, True, d + "/target/model.safetensors", top, torch)
    json.dump(tcfg, open(d + "/target/config.json", "w"), indent=2)
    ajson = dict(ac, model_type="gemma4_text")
    atop = {"model_type": "gemma4_assistant", "architectures": ["Gemma4AssistantForCausalLM"],
            "backbone_hidden_size": s["hidden"], "use_ordered_embeddings": akw["use_ordered_embeddings"],
            "text_config": ajson, "tie_word_embeddings": True, "block_size": 4}
    if s["variant"] == "e":
        atop.update(num_centroids=s["centroids"], centroid_intermediate_top_k=s["centroid_top_k"])
    acfg, alist = export(asst, "", s, s["asst_quant"], d + "/assistant/model.safetensors", atop, torch)
    json.dump(acfg, open(d + "/assistant/config.json", "w"), indent=2)
    log(f"{name}: exported target {len(tlist)} tensors ({os.path.getsize(d + '/target/model.safetensors')} B), "
        f"assistant {len(alist)} ({os.path.getsize(d + '/assistant/model.safetensors')} B); overrides "
        f"{[k for k in tcfg.get('quantization', {}) if isinstance(tcfg['quantization'][k], dict)][:3]}...")

    # 1. transformers' own float32 run (stock code, before the float64 patches): the yardstick
    t32, a32 = to_f32_copy(target, torch), to_f32_copy(asst, torch)
    for m, n in ((t32, "f32 target"), (a32, "f32 assistant")):
        set_eager(m, n)
    from contextlib import nullcontext
    y32, m32 = compute(t32, a32, s, torch, nullcontext, torch.float32)
    log(f"{name}: f32 greedy {m32['greedy']} drafts {m32['draft_tokens']} mtp==greedy {m32['mtp_equals_greedy']}")
    del t32, a32

    # 2. float64 throughout
    calls, undo = install_f64_patches(mg, torch, F64)
    try:
        return finish_fixture(name, s, d, target, asst, tc, consts, tlist, alist, y32, m32, calls, torch, tf, F64)
    finally:
        undo()


def finish_fixture(name, s, d, target, asst, tc, consts, tlist, alist, y32, m32, calls, torch, tf, F64):
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    for m, n in ((target, "target"), (asst, "assistant")):
        set_eager(m, n)
        patch_rotary_buffers(m.model.rotary_emb, torch, F64)

    class NotF64(TorchDispatchMode):
        bad, ops = {}, [0]

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            NotF64.ops[0] += 1
            for t in tree_flatten((args, kwargs, out))[0]:
                if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != F64:
                    k = f"{func}:{t.dtype}"
                    NotF64.bad[k] = NotF64.bad.get(k, 0) + 1
            return out

    gold, meta = compute(target, asst, s, torch, NotF64, F64)
    log(f"{name}: f64 greedy {meta['greedy']} bonus {meta['bonus_token']} drafts {meta['draft_tokens']} "
        f"mtp==greedy {meta['mtp_equals_greedy']} ({meta['mtp_error']}); ops {NotF64.ops[0]}, non-f64 {NotF64.bad or 'none'}, "
        f"patched attention calls {calls['attn']}, patched router calls {calls['router']}")
    if "moe_checks" in meta:
        for i, l in enumerate(meta["moe_checks"]["layers"]):
            log(f"  router/experts layer {i}: {l}")
    if "centroid_checks" in meta:
        for c in meta["centroid_checks"]:
            log(f"  centroid head: {c}")

    failed = failed_checks(NotF64.bad, meta, s, calls)
    f32_err = float(np.abs(y32["logits"].astype(np.float64) - gold["logits"]).max())
    write_safetensors(d + "/golden.safetensors", {k: ("I32" if v.dtype == np.int32 else "F64", v) for k, v in gold.items()},
                      {"source": f"transformers {tf.__version__} Gemma 4, float64 throughout"})
    keep32 = {k: v for k, v in y32.items() if not k.startswith(("act.attn", "act.mlp", "act.experts", "act.ple.",
                                                                  "shared_kv", "act.router_weights"))}
    write_safetensors(d + "/transformers-f32.safetensors",
                      {k: ("I32" if v.dtype == np.int32 else "F32", v) for k, v in keep32.items()},
                      {"source": f"transformers {tf.__version__} Gemma 4 stock code, model in float32"})
    acts = ("act.attn.i = self_attn output (after o_proj); act.mlp.i = dense mlp output (before post_feedforward_layernorm"
            " or, on MoE layers, post_feedforward_layernorm_1); act.layer.i = decoder layer output (after layer_scalar);"
            " act.final_norm = final RMSNorm output")
    if s.get("ple"):
        acts += ("; act.ple_inputs [T, L, P] = project_per_layer_inputs' result (combined per-layer inputs); act.ple.i ="
                 " post_per_layer_input_norm output (the per-layer contribution added to the residual before layer_scalar)")
    if s["variant"] == "moe":
        acts += ("; act.router_scores.i [T, E] = router.proj output; act.router_weights.i / act.router_experts.i [T, k] ="
                 " transformers' top-k weights (softmax over E, top-k, renormalised, x per_expert_scale) and expert ids"
                 " (torch.topk order: descending); act.experts.i = experts output before post_feedforward_layernorm_2")
    golden = {
        "name": name, "variant": s["variant"], "spec": s, "transformers": tf.__version__, "torch": torch.__version__,
        "compute_dtype": "float64 throughout (Gemma4RMSNorm, rotary tables, eager-attention softmax patched; eager experts)",
        "storage_dtype": "F64 (I32 for token ids, expert ids, selected tokens)",
        "non_float64_ops": NotF64.bad, "failed_checks": failed, "constants": consts,
        "prompt": meta["prompt"], "bonus_token": meta["bonus_token"], "greedy": meta["greedy"],
        "mtp_tokens": meta["mtp_tokens"], "mtp_error": meta["mtp_error"], "mtp_equals_greedy": meta["mtp_equals_greedy"],
        "mtp_rounds": meta["mtp_rounds"],
        "draft": {"position_id": s["prompt_len"], "tokens": meta["draft_tokens"],
                  "note": "assistant called with inputs_embeds=cat(target.embed(tok)*bf16(sqrt(H)), h), h = post-final-norm "
                          "target hidden at the last prompt position, then the assistant's projected last_hidden_state; "
                          "position_ids=[[prompt_len]]; shared_kv_states = the target's donor layers (last non-shared "
                          "sliding / full layer) over the prompt"},
        "shared_kv_layout": "[kv_heads, T, head_dim], C order",
        "greedy_min_top1_gap": meta["greedy_min_top1_gap"],
        "teacher_forced_argmax_equals_greedy": meta["teacher_forced_argmax_equals_greedy"],
        "greedy_logits_vs_teacher_forced_max_abs": meta["greedy_logits_vs_teacher_forced_max_abs"],
        "f32_vs_f64_max_abs_logit_err": f32_err,
        "moe_checks": meta.get("moe_checks"), "centroid_checks": meta.get("centroid_checks"),
        "activations": acts,
        "logits": "logits[t] for prompt position t (after softcap); logits_full over prompt+greedy; greedy_logits = "
                  "generate's per-step logits (cached decode), float32 values stored as F64: transformers' decoding "
                  "loop copies each step's logits to float32 even in a float64 model",
        "tensors": {"target": tlist, "assistant": alist},
        "sha256": {p: sha(os.path.join(d, p)) for p in ["target/model.safetensors", "assistant/model.safetensors",
                                                        "golden.safetensors", "transformers-f32.safetensors"]},
    }
    json.dump(golden, open(d + "/golden.json", "w"), indent=1)
    json.dump({"name": name, "greedy": m32["greedy"], "bonus_token": m32["bonus_token"], "draft_tokens": m32["draft_tokens"],
               "mtp_equals_greedy": m32["mtp_equals_greedy"], "mtp_error": m32["mtp_error"],
               "f32_vs_f64_max_abs_logit_err": f32_err,
               "tensors": "as golden.safetensors (F32) minus act.attn/mlp/experts/ple.i, router weights and shared_kv"},
              open(d + "/transformers-f32.json", "w"), indent=1)
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)
    log(f"{name}: done, {size} bytes, f32 vs f64 max |logit| err {f32_err:.3e}, min top-1 gap {meta['greedy_min_top1_gap']:.3f}")
    for f in failed:
        log(f"{name}: CHECK FAILED: {f}")
    if not failed:
        log(f"{name}: all checks passed")
    return not failed


def failed_checks(non_f64, meta, s, calls):
    """Each check a fixture must pass, as a sentence saying what was found when it fails (empty: all passed)."""
    out = []
    if non_f64:
        out.append(f"ops that were not float64 in the golden forwards: {non_f64}")
    if not meta["teacher_forced_argmax_equals_greedy"]:
        out.append("the teacher-forced argmax over prompt + greedy differs from the cached greedy tokens")
    mc = meta.get("moe_checks")
    if mc is not None:
        if calls["router"] == 0:
            out.append("the patched Gemma4TextRouter.forward was never called (transformers routed elsewhere)")
        for i, l in enumerate(mc["layers"]):
            if not l["same_expert_sets"]:
                out.append(f"layer {i}: transformers' experts differ from the numpy top-{s['top_k']} of the router scores")
            if not l["weights_hf_order_max_abs"] < 1e-12:
                out.append(f"layer {i}: router weights vs numpy (softmax over E, top-k, renormalise) max abs "
                           f"{l['weights_hf_order_max_abs']:.3e}, expected < 1e-12")
            if not l["experts_numpy_max_abs"] < 1e-9:
                out.append(f"layer {i}: experts output vs numpy max abs {l['experts_numpy_max_abs']:.3e}, expected < 1e-9")
    for j, c in enumerate(meta.get("centroid_checks") or []):
        if not c["selected_equal"]:
            out.append(f"draft step {j}: centroid-head selected tokens differ from numpy")
        if not c["logits_max_abs"] < 1e-9:
            out.append(f"draft step {j}: centroid-head logits vs numpy max abs {c['logits_max_abs']:.3e}, expected < 1e-9")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--only", choices=["e", "moe"], default=None)
    ap.add_argument("--keep-dirs", action="store_true", help="keep the unpacked folders beside the tarball")
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--seed-e", type=int, default=None, help="another seed for gemma4-e-tiny (default 4242)")
    ap.add_argument("--seed-moe", type=int, default=None, help="another seed for gemma4-moe-tiny (default 4343)")
    args = ap.parse_args()
    if args.selftest:
        selftest()
        return
    if not args.outdir:
        ap.error("OUTDIR required")
    import torch
    import transformers as tf
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    log(f"torch {torch.__version__}, transformers {tf.__version__}, numpy {np.__version__}")
    selftest()
    os.makedirs(args.outdir, exist_ok=True)
    work = os.path.join(args.outdir, "gemma4-family")
    os.makedirs(work, exist_ok=True)
    names = [n for n in SPECS if args.only is None or SPECS[n]["variant"] == args.only]
    results, rc = {}, 0
    for n in names:
        try:
            spec = dict(SPECS[n])
            seed = args.seed_e if spec["variant"] == "e" else args.seed_moe
            if seed is not None:
                spec["seed"] = seed
            results[n] = run_fixture(n, spec, work, torch, tf)
        except Exception as e:
            import traceback
            log(f"{n}: FAILED {e!r}\n{traceback.format_exc()}")
            results[n] = False
        if not results[n]:
            rc = 1
    tar_path = os.path.join(args.outdir, "gemma4-family-fixtures.tar.gz")
    with tarfile.open(tar_path, "w:gz") as tar:
        for n in names:
            if os.path.isdir(os.path.join(work, n)):
                tar.add(os.path.join(work, n), arcname=n)
    log(f"results {results}; wrote {tar_path} ({os.path.getsize(tar_path)} B); unpack with "
        f"tar -xzf gemma4-family-fixtures.tar.gz -C test/fixtures")
    if not args.keep_dirs:
        shutil.rmtree(work, ignore_errors=True)
    open(os.path.join(args.outdir, "make_gemma4_family_fixtures.log"), "w").write("\n".join(LOG) + "\n")
    sys.exit(rc)


if __name__ == "__main__":
    main()
