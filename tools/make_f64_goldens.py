"""True float64 goldens for the tiny-a fixture (test/fixtures/tiny-a-f64/).

The fixture's own goldens (test/fixtures/tiny-a/golden.safetensors, made by tools/make_tiny_a_fixture.py) come
from transformers' Gemma 4 run in torch.float64, but that code still rounds to float32 in three places even then:
  - Gemma4RMSNorm casts its input to float32 (`hidden_states.float()`, `self.weight.float()`);
  - Gemma4TextRotaryEmbedding builds inv_freq in float32 (ROPE_INIT_FUNCTIONS use dtype=torch.float) and computes
    the angles and cos/sin under "Force float32";
  - eager attention takes its softmax in float32 (`softmax(..., dtype=torch.float32)`);
and the tensors are stored as F32. This script rebuilds the same golden tensor set with none of that: the same
transformers modules, those three patched to float64, every tensor stored as F64.

Weights come from the MLX checkpoint the engine loads (default: test/fixtures/tiny-a/{target,assistant}), dequantized
exactly as make_tiny_a_fixture.py computed them (bf16 scales/biases, w = s*q + b in float64; norms and layer_scalar bf16
widened). A TorchDispatchMode watches every aten op of the golden forwards and records any floating tensor that is
not float64 (there must be none).

It also runs the unpatched ("stock") transformers code on the same weights and writes its outputs to
check_stock.safetensors: rounded to f32 they must reproduce the fixture's F32 goldens (proof that the weights and
the call sequence are those of the fixture).

usage: python3 tools/make_f64_goldens.py OUTDIR [--ckpt test/fixtures/tiny-a] [--prompt-file P.json] [--label NAME]
--prompt-file: a JSON object with `prompt` (token ids) and optionally `new_tokens`, for another model than tiny-a
(tools/demo/train_demo.py writes one for the demo model); default: make_tiny_a_fixture.py's 40-token prompt, 24 tokens.
Writes OUTDIR/golden.safetensors (F64 / I32), OUTDIR/golden.json, OUTDIR/check_stock.safetensors, OUTDIR/source.txt
"""
import argparse, hashlib, inspect, json, math, os, sys
import numpy as np
import torch
import transformers
from safetensors.numpy import save_file
from transformers import Gemma4TextConfig, Gemma4ForCausalLM
from transformers.models.gemma4 import modeling_gemma4 as mg
from transformers.models.gemma4_assistant import Gemma4AssistantConfig, Gemma4AssistantForCausalLM
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

F64 = torch.float64
NEW_TOKENS = 24
DRAFT_STEPS = 3


# ---------------------------------------------------------------------------------------------- checkpoint
def read_safetensors(path):
    """Minimal reader: BF16/F32/F64 widened to float64, U32/I32 as is."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(n))
        body = f.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        raw, dt, shape = body[a:b], v["dtype"], v["shape"]
        if dt == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        elif dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif dt == "F64":
            arr = np.frombuffer(raw, dtype="<f8").copy()
        elif dt == "U32":
            arr = np.frombuffer(raw, dtype="<u4").copy()
        elif dt == "I32":
            arr = np.frombuffer(raw, dtype="<i4").copy()
        else:
            raise ValueError(f"{path}: {k} has dtype {dt}")
        out[k] = arr.reshape(shape)
    return out


def dequant(packed, scales, biases, group):
    """MLX affine: w[o, g*group + j] = scales[o, g] * q + biases[o, g], q packed little-end-first in uint32."""
    out_f, pc = packed.shape
    n_groups = scales.shape[1]
    in_f = n_groups * group
    bits = pc * 32 // in_f
    assert pc * 32 == in_f * bits and 32 % bits == 0, (packed.shape, scales.shape)
    per, mask = 32 // bits, (1 << bits) - 1
    q = np.empty((out_f, pc, per), dtype=np.uint32)
    for j in range(per):
        q[..., j] = (packed >> np.uint32(bits * j)) & np.uint32(mask)
    q = q.reshape(out_f, n_groups, group).astype(np.float64)
    w = scales[..., None] * q + biases[..., None]  # exact in float64 (bf16 s, b; integer q)
    return w.reshape(out_f, in_f), bits


def mlx_weights(path, prefix, group):
    raw = read_safetensors(path)
    out, bits = {}, {}
    for k, v in raw.items():
        if k.endswith(".scales") or k.endswith(".biases"):
            continue
        if k.endswith(".weight") and (k[: -len(".weight")] + ".scales") in raw:
            mod = k[: -len(".weight")]
            w, b = dequant(v, raw[mod + ".scales"], raw[mod + ".biases"], group)
            bits[mod] = b
        else:
            w = v
        assert k.startswith(prefix), k
        out[k[len(prefix):]] = np.ascontiguousarray(w, dtype=np.float64)
    return out, bits


def load_into(model, weights, what):
    params = dict(model.named_parameters())
    params.update({k: v for k, v in model.named_buffers() if k.endswith("layer_scalar")})
    used = set()
    with torch.no_grad():
        for name, p in params.items():
            if name == "lm_head.weight":
                continue  # tied to embed_tokens (checked below)
            if name not in weights:
                raise KeyError(f"{what}: no stored tensor for {name}")
            w = torch.from_numpy(weights[name])
            if tuple(w.shape) != tuple(p.shape):
                raise ValueError(f"{what}: {name} stored {tuple(w.shape)}, model {tuple(p.shape)}")
            p.copy_(w)
            used.add(name)
    extra = sorted(set(weights) - used)
    if extra:
        raise ValueError(f"{what}: stored tensors not used: {extra[:8]}")
    emb = model.model.embed_tokens.weight
    if not torch.equal(model.lm_head.weight, emb):
        raise ValueError(f"{what}: lm_head is not tied to embed_tokens")
    return len(used)


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


# --------------------------------------------------------------------------------------- float64 patches
def rms_norm_f64(self, hidden_states):
    """Gemma4RMSNorm without the float32 cast: x * (mean(x^2) + eps)^-0.5 * w, all in the input's dtype."""
    mean_squared = hidden_states.pow(2).mean(-1, keepdim=True) + self.eps
    out = hidden_states * torch.pow(mean_squared, -0.5)
    if self.with_scale:
        out = out * self.weight
    return out


def inv_freq_f64(params, half):
    """transformers' default / proportional inverse frequencies (modeling_rope_utils), computed in float64.
    `half` = head_dim / 2, the length of transformers' own table (5.17 keeps the full layers' head dim in a
    per-layer config, so it is taken from the table rather than from the config)."""
    base = float(params["rope_theta"])
    hd = 2 * half
    if params["rope_type"] == "default":
        assert params.get("partial_rotary_factor", 1.0) == 1.0
        return 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.int64).to(F64) / hd))
    if params["rope_type"] == "proportional":
        angles = int(params.get("partial_rotary_factor", 1.0) * hd // 2)
        rot = 1.0 / (base ** (torch.arange(0, 2 * angles, 2, dtype=torch.int64).to(F64) / hd))
        inv = torch.cat((rot, torch.zeros(hd // 2 - angles, dtype=F64)))
        return inv / float(params.get("factor", 1.0))
    raise ValueError(f"rope_type {params['rope_type']}")


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


ATTN_CALLS = {"n": 0}


def eager_attention_f64(module, query, key, value, attention_mask, dropout=0.0, scaling=None, softcap=None, **kwargs):
    """transformers' eager_attention_forward with the softmax in the input dtype instead of float32."""
    ATTN_CALLS["n"] += 1
    if scaling is None:
        scaling = module.head_dim ** -0.5
    key_states = mg.repeat_kv(key, module.num_key_value_groups)
    value_states = mg.repeat_kv(value, module.num_key_value_groups)
    w = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if softcap is not None:
        w = torch.tanh(w / softcap) * softcap
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            w = w.masked_fill(~attention_mask, float("-inf"))
        else:
            w = w + attention_mask
    w = torch.softmax(w, dim=-1)
    out = torch.matmul(w, value_states).transpose(1, 2).contiguous()
    return out, w


def patch_rotary_buffers(rot, log):
    for lt in list(rot.rope_type.keys()):
        name = f"{lt}_inv_freq"
        old = getattr(rot, name)
        new = inv_freq_f64(rot.config.rope_parameters[lt], old.shape[-1]).to(old.device)
        assert old.shape == new.shape, (lt, old.shape, new.shape)
        # the f32 tables transformers builds must be our f64 ones rounded (same formula)
        d = (new.to(torch.float32).to(F64) - old.to(F64)).abs().max().item()
        log(f"  rotary {lt}: {tuple(new.shape)} f64 inv_freq, {int((new != 0).sum())} rotating; |round_f32(f64) - transformers f32| max {d:.3e}")
        assert d <= 1e-7 * new.abs().max().item(), d
        setattr(rot, name, new)
        assert getattr(rot, name).dtype == F64
        assert getattr(rot, f"{lt}_attention_scaling") == 1.0


class NotFloat64(TorchDispatchMode):
    """Records every aten op that reads or writes a floating tensor other than float64."""

    def __init__(self):
        super().__init__()
        self.bad = {}
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.ops += 1
        for t in tree_flatten((args, kwargs, out))[0]:
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != F64:
                k = f"{func}:{t.dtype}"
                self.bad[k] = self.bad.get(k, 0) + 1
        return out


# --------------------------------------------------------------------------------------------- goldens
def compute(target, asst, prompt, log, watch, dtype=F64):
    """The golden set of make_tiny_a_fixture.py (same calls, same order). `watch` wraps the direct forwards; every
    float output must be `dtype` (the model's)."""
    T, V = len(prompt), target.config.vocab_size
    ids = torch.tensor([prompt])
    g, meta = {}, {}
    captured, hooks = {}, []
    for i, layer in enumerate(target.model.layers):
        hooks.append(layer.self_attn.register_forward_hook(lambda m, a, o, i=i: captured.__setitem__(f"attn.{i}", o[0].detach().clone())))
        hooks.append(layer.mlp.register_forward_hook(lambda m, a, o, i=i: captured.__setitem__(f"mlp.{i}", o.detach().clone())))
        hooks.append(layer.register_forward_hook(lambda m, a, o, i=i: captured.__setitem__(f"layer.{i}", (o[0] if isinstance(o, tuple) else o).detach().clone())))
    hooks.append(target.model.norm.register_forward_hook(lambda m, a, o: captured.__setitem__("final_norm", o.detach().clone())))
    with torch.no_grad(), watch():
        out = target(ids, use_cache=False)
    for h in hooks:
        h.remove()
    g["prompt"] = np.array(prompt, dtype=np.int32)
    g["logits"] = out.logits[0]
    for k, v in captured.items():
        g["act." + k] = v[0]

    with torch.no_grad():
        gen = target.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False, min_new_tokens=NEW_TOKENS)
    greedy = gen[0, T:].tolist()
    full = torch.tensor([prompt + greedy])
    with torch.no_grad(), watch():
        lf = target(full, use_cache=False).logits[0]
    tf = lf[T - 1:-1].argmax(-1).tolist()
    meta["teacher_forced_argmax_equals_greedy"] = tf == greedy
    srt = torch.sort(lf[T - 1:-1], dim=-1).values
    meta["greedy_min_top1_gap"] = float((srt[:, -1] - srt[:, -2]).min())
    g["greedy"] = np.array(greedy, dtype=np.int32)
    g["logits_full"] = lf

    with torch.no_grad(), watch():
        o = target(ids, use_cache=False, output_hidden_states=True, return_shared_kv_states=True)
    h_last = o.hidden_states[-1][:, -1:]
    meta["seed_hidden_vs_final_norm_max_abs"] = float((h_last[0, -1] - captured["final_norm"][0, -1]).abs().max())
    meta["prompt_logits_vs_second_forward_max_abs"] = float((o.logits[0] - out.logits[0]).abs().max())
    bonus = int(o.logits[0, -1].argmax())
    kv = {k: (v[0], v[1]) for k, v in o.shared_kv_states.items()}
    drafts, dlogits, hstates = [], [], []
    tok, h = bonus, h_last
    with torch.no_grad(), watch():
        for _ in range(DRAFT_STEPS):
            emb = target.model.embed_tokens(torch.tensor([[tok]]))
            ao = asst(inputs_embeds=torch.cat([emb, h], -1), position_ids=torch.tensor([[T]]), shared_kv_states=kv, use_cache=False)
            tok = int(ao.logits[0, -1].argmax())
            h = ao.last_hidden_state
            drafts.append(tok)
            dlogits.append(ao.logits[0, -1])
            hstates.append(h[0, -1])
    g["draft.tokens"] = np.array(drafts, dtype=np.int32)
    g["draft.logits"] = torch.stack(dlogits)
    g["draft.hidden"] = torch.stack(hstates)
    g["draft.seed_hidden"] = h_last[0, -1]
    for k, (kk, vv) in kv.items():
        g[f"shared_kv.{k}.keys"] = kk[0]
        g[f"shared_kv.{k}.values"] = vv[0]

    # HF assisted generation with the MTP drafter (as make_tiny_a_fixture.py)
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
            m = target.generate(ids, assistant_model=asst, max_new_tokens=NEW_TOKENS, do_sample=False,
                                min_new_tokens=NEW_TOKENS, num_assistant_tokens=3, num_assistant_tokens_schedule="constant")
        mtp = m[0, T:].tolist()
    except Exception as e:  # recorded, not fatal
        mtp, mtp_err = [], repr(e)
    cg.SinglePositionMultiTokenCandidateGenerator.get_candidates = orig

    out_np = {}
    for k, v in g.items():
        if isinstance(v, torch.Tensor):
            assert v.dtype == dtype, (k, v.dtype)
            v = v.detach().contiguous().numpy()
        out_np[k] = np.ascontiguousarray(v)
    meta.update({"prompt": prompt, "bonus_token": bonus, "greedy": greedy, "mtp_tokens": mtp, "mtp_error": mtp_err,
                 "mtp_equals_greedy": mtp == greedy, "mtp_rounds": rounds, "draft_tokens": drafts})
    return out_np, meta


def start_run():
    """The tools' common start: OUTDIR and --ckpt arguments, a logger that also keeps its lines (they go into
    the JSON written beside the tensors), a fixed seed and the versions line."""
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    # tiny-a, wherever the tool is started from.
    ap.add_argument("--ckpt", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "fixtures", "tiny-a"))
    ap.add_argument("--prompt-file", default=None, help="JSON {prompt: [ids], new_tokens?: n} (default: tiny-a's)")
    ap.add_argument("--label", default="tiny-a", help="model name in the JSON written (default tiny-a)")
    args = ap.parse_args()
    args.prompt = None
    if args.prompt_file:
        global NEW_TOKENS
        p = json.load(open(args.prompt_file))
        args.prompt = [int(t) for t in p["prompt"]]
        NEW_TOKENS = int(p.get("new_tokens", NEW_TOKENS))
    os.makedirs(args.outdir, exist_ok=True)
    lines = []

    def log(s):
        print(s, flush=True)
        lines.append(s)

    torch.manual_seed(0)
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, threads {torch.get_num_threads()}")
    return args, log, lines


def load_fixture(ckpt, log, prompt=None):
    """The tiny-a target and assistant (or those of `ckpt`) as float64 transformers models holding exactly the
    dequantized MLX weights (each module's bits checked against config.json), and make_tiny_a_fixture.py's prompt
    unless `prompt` is given."""
    tdir, adir = os.path.join(ckpt, "target"), os.path.join(ckpt, "assistant")
    tconf, aconf = json.load(open(os.path.join(tdir, "config.json"))), json.load(open(os.path.join(adir, "config.json")))
    tc = {k: v for k, v in tconf["text_config"].items() if k != "model_type"}
    target = Gemma4ForCausalLM(Gemma4TextConfig(**tc)).to(F64).eval()
    tw, tbits = mlx_weights(os.path.join(tdir, "model.safetensors"), "language_model.", tconf["quantization"]["group_size"])
    for mod, b in tbits.items():
        want = tconf["quantization"].get(mod, {}).get("bits", tconf["quantization"]["bits"])
        assert b == want, (mod, b, want)
    log(f"target: {load_into(target, tw, 'target')} tensors loaded ({len(tbits)} quantized, bits {sorted(set(tbits.values()))})")
    acfg = Gemma4AssistantConfig(text_config=aconf["text_config"], backbone_hidden_size=aconf["backbone_hidden_size"],
                                 use_ordered_embeddings=aconf.get("use_ordered_embeddings", False))
    asst = Gemma4AssistantForCausalLM(acfg).to(F64).eval()
    aw, abits = mlx_weights(os.path.join(adir, "model.safetensors"), "", aconf["quantization"]["group_size"])
    log(f"assistant: {load_into(asst, aw, 'assistant')} tensors loaded ({len(abits)} quantized, bits {sorted(set(abits.values()))})")
    V = tc["vocab_size"]
    if prompt is None:
        prompt = [(7 * i + 1 + 978) % V for i in range(40)]  # make_tiny_a_fixture.py's prompt
    checkpoint = {"target/model.safetensors": sha(os.path.join(tdir, "model.safetensors")),
                  "assistant/model.safetensors": sha(os.path.join(adir, "model.safetensors"))}
    return target, asst, tc, prompt, checkpoint


def main():
    args, log, lines = start_run()
    target, asst, tc, prompt, checkpoint = load_fixture(args.ckpt, log, args.prompt)
    es = target.model.embed_tokens.embed_scale
    log(f"target embed_scale {es.item()!r} ({es.dtype}); sqrt(H) = {math.sqrt(tc['hidden_size'])!r}")
    log(f"attention implementation (stock): target {target.config._attn_implementation}, assistant {asst.config.get_text_config()._attn_implementation}")

    # 1. stock transformers (its f32 casts included): must reproduce the fixture's F32 goldens
    from contextlib import nullcontext
    stock, stock_meta = compute(target, asst, prompt, log, nullcontext)
    log(f"stock: greedy {stock_meta['greedy']}, bonus {stock_meta['bonus_token']}, drafts {stock_meta['draft_tokens']}, mtp==greedy {stock_meta['mtp_equals_greedy']}")

    # 2. float64 throughout
    src = []
    for obj in (mg.Gemma4RMSNorm.forward, mg.Gemma4TextRotaryEmbedding.forward, mg.eager_attention_forward, mg.apply_rotary_pos_emb):
        try:
            src.append(inspect.getsource(obj))
        except Exception as e:
            src.append(f"<{obj}: {e!r}>")
    try:
        src.append(f"ACT2FN['gelu_pytorch_tanh'] = {type(target.model.layers[0].mlp.act_fn)}\n" + inspect.getsource(type(target.model.layers[0].mlp.act_fn)))
    except Exception as e:
        src.append(repr(e))
    open(os.path.join(args.outdir, "source.txt"), "w").write("\n\n".join(src))
    mg.Gemma4RMSNorm.forward = rms_norm_f64
    mg.Gemma4TextRotaryEmbedding.forward = rotary_forward_f64
    mg.eager_attention_forward = eager_attention_f64
    for m in (target, asst):
        try:
            m.set_attn_implementation("eager")
        except Exception as e:  # older API: set the configs directly
            log(f"set_attn_implementation failed ({e!r}); setting the configs")
            for c in (m.config, m.config.get_text_config(), m.model.config):
                c._attn_implementation = "eager"
    log(f"attention implementation (f64): target {target.config._attn_implementation}, assistant {asst.config.get_text_config()._attn_implementation}, assistant.model {asst.model.config._attn_implementation}")
    log("rotary tables:")
    patch_rotary_buffers(target.model.rotary_emb, log)
    patch_rotary_buffers(asst.model.rotary_emb, log)

    modes = []

    def watch():
        m = NotFloat64()
        modes.append(m)
        return m

    gold, meta = compute(target, asst, prompt, log, watch)
    bad = {}
    for m in modes:
        for k, v in m.bad.items():
            bad[k] = bad.get(k, 0) + v
    log(f"f64: {sum(m.ops for m in modes)} aten ops watched, non-float64 floating tensors: {bad or 'none'}; patched attention calls {ATTN_CALLS['n']}")
    log(f"f64: greedy {meta['greedy']}, bonus {meta['bonus_token']}, drafts {meta['draft_tokens']}, mtp==greedy {meta['mtp_equals_greedy']} ({meta['mtp_error']})")
    for k in ("teacher_forced_argmax_equals_greedy", "greedy_min_top1_gap", "seed_hidden_vs_final_norm_max_abs", "prompt_logits_vs_second_forward_max_abs"):
        log(f"  {k}: {meta[k]} (stock {stock_meta[k]})")
    log("f64 vs stock (transformers' own f32 roundings), max abs:")
    for k in gold:
        if gold[k].dtype == np.float64:
            d = float(np.abs(gold[k] - stock[k]).max())
            log(f"  {k}: {d:.3e} (max |x| {float(np.abs(gold[k]).max()):.3e})")
        else:
            log(f"  {k}: {'equal' if np.array_equal(gold[k], stock[k]) else 'DIFFERENT'}")

    save_file(gold, os.path.join(args.outdir, "golden.safetensors"),
              metadata={"source": f"transformers {transformers.__version__} Gemma 4, float64 throughout (tools/make_f64_goldens.py)"})
    save_file(stock, os.path.join(args.outdir, "check_stock.safetensors"),
              metadata={"source": f"transformers {transformers.__version__} Gemma 4 stock code (f32 RMSNorm/RoPE/softmax), float64 model, values not rounded"})
    out = {
        "name": f"{args.label}-f64",
        "transformers": transformers.__version__, "torch": torch.__version__,
        "compute_dtype": "float64 throughout: transformers' Gemma4RMSNorm, rotary tables and eager-attention softmax patched to stay in float64 (no float32 anywhere; checked with a TorchDispatchMode over every golden forward)",
        "storage_dtype": "F64 (I32 for token ids)",
        "checkpoint": checkpoint,
        "prompt": meta["prompt"], "bonus_token": meta["bonus_token"], "greedy": meta["greedy"],
        "mtp_tokens": meta["mtp_tokens"], "mtp_error": meta["mtp_error"], "mtp_equals_greedy": meta["mtp_equals_greedy"],
        "mtp_rounds": meta["mtp_rounds"],
        "draft": {"position_id": len(prompt), "tokens": meta["draft_tokens"],
                  "note": "as test/fixtures/tiny-a/golden.json: assistant called with inputs_embeds=cat(target.embed(tok)*sqrt(H), h), h = post-final-norm target hidden at the last prompt position, then the assistant's projected last_hidden_state; position_ids=[[prompt_len]]; shared_kv_states = target's last sliding and last full layer K/V over the prompt"},
        "shared_kv_layout": "[kv_heads, T, head_dim], C order for both layer types (the F32 fixture's sliding entries hold [T, kv_heads, head_dim] bytes; these do not)",
        "greedy_min_top1_gap": meta["greedy_min_top1_gap"],
        "teacher_forced_argmax_equals_greedy": meta["teacher_forced_argmax_equals_greedy"],
        "non_float64_ops": bad,
        "activations": "act.attn.i = self_attn output (after o_proj); act.mlp.i = mlp output (before post_feedforward_layernorm); act.layer.i = decoder layer output (after layer_scalar); act.final_norm = final RMSNorm output",
        "logits": "logits[t] for prompt position t (after softcap); logits_full over prompt+greedy",
        "stock": {k: stock_meta[k] for k in ("greedy", "bonus_token", "draft_tokens", "mtp_equals_greedy")},
        "log": lines,
    }
    out["sha256"] = {"golden.safetensors": sha(os.path.join(args.outdir, "golden.safetensors"))}
    json.dump(out, open(os.path.join(args.outdir, "golden.json"), "w"), indent=1)
    if bad or ATTN_CALLS["n"] == 0 and target.config._attn_implementation == "eager":
        log("FAILED: float32 left in the golden forwards" if bad else "FAILED: patched attention never called")
        sys.exit(1)
    log("ok")


if __name__ == "__main__":
    main()
