"""The tiny dense Gemma 4 fixture: a target and its MTP assistant in MLX layout, with goldens from transformers.

Builds test/fixtures/tiny-a (the model most exactness, golden and MTP tests run on). The target has the 12B's
structure at toy size: five sliding layers and one full layer, twice; 4 query heads over 2 sliding KV heads (head dim
64) and 1 full KV head (head dim 128); `attention_k_eq_v`; proportional RoPE on full layers; sliding window 16 (a
40-token prompt wraps the ring twice); final softcap 30; a tied quantized embedding; affine 4-bit group 64 with 8-bit
MLP projections declared as per-module overrides in `quantization`, as the published 12B has them. The assistant is a
`gemma4_assistant` drafter (layers S, S, S, F; hidden 128; `backbone_hidden_size` 256), 4-bit group 64.

Weights are random with realistic scales (activations O(1), logits spread over the softcap), quantized or rounded to
bf16 first; transformers then computes in float64 with exactly the stored values, so the goldens are those of the
checkpoint Ringside loads. Reads transformers' Gemma 4 code (models/gemma4, models/gemma4_assistant).

Needs python3 with torch, transformers >= 5.17, numpy and safetensors. Deterministic: the same seed gives the same
bytes (golden.json `sha256` records them).
usage (from the repo root): python3 tools/make_tiny_a_fixture.py [OUTDIR] [NAME] [SEED]
    OUTDIR defaults to test/fixtures, NAME to tiny-a (the only spec), SEED to the spec's.
Writes OUTDIR/NAME/{target,assistant}/{config.json,model.safetensors}, golden.safetensors and golden.json; the
fields are described in test/fixtures/tiny-a/README.md.
"""
import json, math, os, sys, hashlib
import numpy as np
import torch
import transformers
from safetensors.numpy import save_file
from transformers import Gemma4TextConfig, Gemma4ForCausalLM
from transformers.models.gemma4_assistant import Gemma4AssistantConfig, Gemma4AssistantForCausalLM

SPECS = {
    # 12B-like geometry (q:kv sliding 2:1, one global KV head, K=V on full layers), 8-bit MLP overrides,
    # quantized 4-bit assistant.
    "tiny-a": dict(vocab=1024, hidden=256, inter=512, layers=12, heads=4, kv=2, gkv=1, hd=64, ghd=128,
                   window=16, group=64, bits=4, mlp_bits=8, asst_hidden=128, asst_inter=256,
                   asst_quant=True, prompt_len=40, new_tokens=24, seed=1235),
}

EMBED_STD = float(os.environ.get("EMBED_STD", "0.05"))
FINAL_NORM = float(os.environ.get("FINAL_NORM", "6.0"))

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

def text_config(s, asst=False):
    L = 4 if asst else s["layers"]
    types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(L)]
    if asst:
        types = ["sliding_attention"] * 3 + ["full_attention"]
    types[-1] = "full_attention"
    return dict(
        vocab_size=s["vocab"], hidden_size=s["asst_hidden"] if asst else s["hidden"],
        intermediate_size=s["asst_inter"] if asst else s["inter"], num_hidden_layers=L,
        num_attention_heads=s["heads"], num_key_value_heads=s["kv"], head_dim=s["hd"],
        global_head_dim=s["ghd"], num_global_key_value_heads=s["gkv"], attention_k_eq_v=True,
        sliding_window=s["window"], layer_types=types, rms_norm_eps=1e-6,
        final_logit_softcapping=None if asst else 30.0, hidden_activation="gelu_pytorch_tanh",
        hidden_size_per_layer_input=0, vocab_size_per_layer_input=0, num_kv_shared_layers=L if asst else 0,
        max_position_embeddings=4096, tie_word_embeddings=True,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                            "rope_theta": 1000000.0}},
    )

def bf16_embed_scale(model, hidden):
    """sqrt(H) rounded to bf16, as MLX and transformers compute it with bf16 checkpoints (12B: 62.0);
    a float64 model would otherwise use the exact root."""
    v = float(bf16_to_f64(bf16_round(np.array([math.sqrt(hidden)], np.float32)))[0])
    model.model.embed_tokens.embed_scale.fill_(v)

def fill_random(model, rng):
    """Weights of realistic scale so that activations are O(1) and logits spread over the softcap."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("model.norm.weight"):
                v = FINAL_NORM * (1.0 + 0.25 * rng.standard_normal(p.shape))
            elif name.endswith("norm.weight"):
                v = 1.0 + 0.25 * rng.standard_normal(p.shape)
            elif "embed_tokens" in name:
                v = EMBED_STD * rng.standard_normal(p.shape)
            else:
                v = rng.standard_normal(p.shape) / math.sqrt(p.shape[-1])
            p.copy_(torch.from_numpy(v))
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.copy_(torch.from_numpy(rng.uniform(0.6, 1.2, size=b.shape)))

def export(model, prefix, s, quant, mlp_bits, path, cfg_top):
    """Quantize/round the model's weights in place (so HF computes with exactly the stored values)
    and write an MLX-layout safetensors file."""
    tensors, qcfg = {}, {"group_size": s["group"], "bits": s["bits"], "mode": "affine"}
    sd = dict(model.named_parameters())
    sd.update({k: v for k, v in model.named_buffers() if k.endswith("layer_scalar")})
    with torch.no_grad():
        for name, p in sd.items():
            if name == "lm_head.weight":
                continue  # tied
            arr = p.detach().cpu().numpy().astype(np.float64)
            out_name = prefix + name
            is_linear = arr.ndim == 2
            if quant and is_linear and arr.shape[1] % s["group"] == 0:
                mod = out_name[: -len(".weight")]
                bits = mlp_bits if ".mlp." in name else s["bits"]
                if bits != s["bits"]:
                    qcfg[mod] = {"group_size": s["group"], "bits": bits}
                packed, sb, bb, deq = quantize(arr, s["group"], bits)
                tensors[mod + ".weight"] = packed
                tensors[mod + ".scales"] = sb
                tensors[mod + ".biases"] = bb
                p.copy_(torch.from_numpy(deq))
            else:
                bits16 = bf16_round(arr.astype(np.float32))
                tensors[out_name] = bits16
                p.copy_(torch.from_numpy(bf16_to_f64(bits16).reshape(arr.shape)))
    # numpy has no bf16: write U16 bits, then patch dtype in the header to BF16 for float tensors
    raw = path + ".tmp"
    save_file({k: v for k, v in tensors.items()}, raw, metadata={"format": "mlx"})
    with open(raw, "rb") as f:
        n = int.from_bytes(f.read(8), "little"); hdr = json.loads(f.read(n)); body = f.read()
    for k, v in hdr.items():
        if k != "__metadata__" and v["dtype"] == "U16":
            v["dtype"] = "BF16"
    h = json.dumps(hdr, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little")); f.write(h); f.write(body)
    os.remove(raw)
    cfg = dict(cfg_top)
    if quant:
        cfg["quantization"] = qcfg
        cfg["quantization_config"] = qcfg
    return cfg

def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "test/fixtures"
    name = sys.argv[2] if len(sys.argv) > 2 else "tiny-a"
    s = dict(SPECS[name])
    if len(sys.argv) > 3:
        s["seed"] = int(sys.argv[3])
    torch.manual_seed(s["seed"]); rng = np.random.default_rng(s["seed"])
    d = os.path.join(outdir, name); os.makedirs(d + "/target", exist_ok=True); os.makedirs(d + "/assistant", exist_ok=True)

    tcfg = Gemma4TextConfig(**text_config(s))
    target = Gemma4ForCausalLM(tcfg).to(torch.float64).eval()
    fill_random(target, rng)
    bf16_embed_scale(target, s["hidden"])
    tc_json = text_config(s); tc_json["model_type"] = "gemma4_text"
    top = {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"], "text_config": tc_json,
           "tie_word_embeddings": True}
    cfg = export(target, "language_model.", s, True, s["mlp_bits"], d + "/target/model.safetensors", top)
    json.dump(cfg, open(d + "/target/config.json", "w"), indent=2)

    ac_json = text_config(s, asst=True); ac_json["model_type"] = "gemma4_text"
    acfg = Gemma4AssistantConfig(text_config=ac_json, backbone_hidden_size=s["hidden"], use_ordered_embeddings=False)
    asst = Gemma4AssistantForCausalLM(acfg).to(torch.float64).eval()
    fill_random(asst, rng)
    atop = {"model_type": "gemma4_assistant", "architectures": ["Gemma4AssistantForCausalLM"],
            "backbone_hidden_size": s["hidden"], "use_ordered_embeddings": False, "text_config": ac_json,
            "tie_word_embeddings": True, "block_size": 4}
    acfg_out = export(asst, "", s, s["asst_quant"], s["bits"], d + "/assistant/model.safetensors", atop)
    json.dump(acfg_out, open(d + "/assistant/config.json", "w"), indent=2)

    T, V = s["prompt_len"], s["vocab"]
    prompt = [(7 * i + 1 + 978) % V for i in range(T)]
    ids = torch.tensor([prompt])
    captured = {}
    hooks = []
    for i, layer in enumerate(target.model.layers):
        hooks.append(layer.self_attn.register_forward_hook(lambda m, a, o, i=i: captured.__setitem__(f"attn.{i}", o[0].detach().clone())))
        hooks.append(layer.mlp.register_forward_hook(lambda m, a, o, i=i: captured.__setitem__(f"mlp.{i}", o.detach().clone())))
        hooks.append(layer.register_forward_hook(lambda m, a, o, i=i: captured.__setitem__(f"layer.{i}", (o[0] if isinstance(o, tuple) else o).detach().clone())))
    hooks.append(target.model.norm.register_forward_hook(lambda m, a, o: captured.__setitem__("final_norm", o.detach().clone())))
    with torch.no_grad():
        out = target(ids, use_cache=False)
    for h in hooks: h.remove()
    logits64 = out.logits[0].numpy()
    golden = {"prompt": np.array(prompt, dtype=np.int32), "logits": logits64.astype(np.float32)}
    for k, v in captured.items():
        golden["act." + k] = v[0].numpy().astype(np.float32)

    # f32 run of the same weights: how far plain f32 drifts from f64 (a tolerance yardstick)
    t32 = Gemma4ForCausalLM(tcfg).eval(); t32.load_state_dict({k: v.float() for k, v in target.state_dict().items()})
    bf16_embed_scale(t32, s["hidden"])
    with torch.no_grad():
        l32 = t32(ids, use_cache=False).logits[0].numpy()
    f32_err = float(np.abs(l32 - logits64).max())

    # classic greedy decode with the KV cache (one token at a time after prefill)
    with torch.no_grad():
        g = target.generate(ids, max_new_tokens=s["new_tokens"], do_sample=False, min_new_tokens=s["new_tokens"])
    greedy = g[0, T:].tolist()
    # teacher-forced logits over prompt+greedy (positions T-1 .. end) for chain checks
    full = torch.tensor([prompt + greedy])
    with torch.no_grad():
        lf = target(full, use_cache=False).logits[0].numpy()
    golden["greedy"] = np.array(greedy, dtype=np.int32)
    srt = np.sort(lf[T - 1:-1], axis=-1)
    min_gap = float((srt[:, -1] - srt[:, -2]).min())
    golden["logits_full"] = lf.astype(np.float32)

    # assistant forward, called directly: one draft step from the state after the prompt
    with torch.no_grad():
        o = target(ids, use_cache=False, output_hidden_states=True, return_shared_kv_states=True)
    h_last = o.hidden_states[-1][:, -1:]          # post-final-norm hidden of the last prompt position
    bonus = int(o.logits[0, -1].argmax())
    kv = {k: (v[0], v[1]) for k, v in o.shared_kv_states.items()}
    emb = target.model.embed_tokens(torch.tensor([[bonus]]))
    drafts, dlogits, hstates = [], [], []
    tok, h = bonus, h_last
    with torch.no_grad():
        for step in range(3):
            emb = target.model.embed_tokens(torch.tensor([[tok]]))
            ao = asst(inputs_embeds=torch.cat([emb, h], -1), position_ids=torch.tensor([[T]]),
                      shared_kv_states=kv, use_cache=False)
            tok = int(ao.logits[0, -1].argmax()); h = ao.last_hidden_state
            drafts.append(tok); dlogits.append(ao.logits[0, -1].numpy()); hstates.append(h[0, -1].numpy())
    golden["draft.tokens"] = np.array(drafts, dtype=np.int32)
    golden["draft.logits"] = np.stack(dlogits).astype(np.float32)
    golden["draft.hidden"] = np.stack(hstates).astype(np.float32)
    golden["draft.seed_hidden"] = h_last[0, -1].numpy().astype(np.float32)
    for k, (kk, vv) in kv.items():
        golden[f"shared_kv.{k}.keys"] = kk[0].numpy().astype(np.float32)
        golden[f"shared_kv.{k}.values"] = vv[0].numpy().astype(np.float32)

    # HF assisted generation with the MTP drafter: must reproduce classic greedy
    rounds = []
    from transformers.generation import candidate_generator as cg
    orig = cg.SinglePositionMultiTokenCandidateGenerator.get_candidates
    def spy(self, input_ids, *a, **kw):
        r = orig(self, input_ids, *a, **kw)
        rounds.append({"context_len": int(input_ids.shape[1]), "drafts": r[0][0, input_ids.shape[1]:].tolist()})
        return r
    cg.SinglePositionMultiTokenCandidateGenerator.get_candidates = spy
    mtp_err = None
    asst.generation_config.num_assistant_tokens = 3
    asst.generation_config.num_assistant_tokens_schedule = "constant"
    try:
        with torch.no_grad():
            m = target.generate(ids, assistant_model=asst, max_new_tokens=s["new_tokens"], do_sample=False,
                                min_new_tokens=s["new_tokens"], num_assistant_tokens=3,
                                num_assistant_tokens_schedule="constant")
        mtp = m[0, T:].tolist()
    except Exception as e:  # recorded, not fatal
        mtp, mtp_err = [], repr(e)
    cg.SinglePositionMultiTokenCandidateGenerator.get_candidates = orig

    save_file(golden, d + "/golden.safetensors", metadata={"source": "transformers " + transformers.__version__})
    meta = {
        "name": name, "spec": s, "transformers": transformers.__version__, "torch": torch.__version__,
        "compute_dtype": "float64", "prompt": prompt, "bonus_token": bonus, "greedy": greedy,
        "mtp_tokens": mtp, "mtp_error": mtp_err, "mtp_equals_greedy": mtp == greedy, "mtp_rounds": rounds,
        "draft": {"position_id": T, "tokens": drafts, "note": "assistant called with inputs_embeds=cat(target.embed(tok)*sqrt(H), h) where h starts as the post-final-norm target hidden at the last prompt position and then is the assistant's projected last_hidden_state; position_ids=[[prompt_len]]; shared_kv_states=target's last sliding and last full layer K/V over the prompt"},
        "f32_vs_f64_max_abs_logit_err": f32_err,
        "greedy_min_top1_gap": min_gap,
        "activations": "act.attn.i = self_attn output (after o_proj); act.mlp.i = mlp output (before post_feedforward_layernorm); act.layer.i = decoder layer output (after layer_scalar); act.final_norm = final RMSNorm output",
        "logits": "logits[t] for prompt position t (after softcap); logits_full over prompt+greedy",
        "sha256": {p: hashlib.sha256(open(os.path.join(d, p), "rb").read()).hexdigest()
                   for p in ["target/model.safetensors", "assistant/model.safetensors", "golden.safetensors"]},
    }
    json.dump(meta, open(d + "/golden.json", "w"), indent=1)
    print(name, "seed", s["seed"], "min_gap", round(min_gap, 4), "greedy", greedy[:10], "mtp==greedy", mtp == greedy, "mtp_err", mtp_err, "f32err", f32_err,
          "rounds", len(rounds), "drafts", drafts)

if __name__ == "__main__":
    main()
