"""What transformers itself achieves in float32 on the tiny-a fixture: the yardstick for the engine's NMSE.

The acceptance bounds of the engine (act.* and the drafter's projected hidden within NMSE 1e-8 of float64) are
met or missed by margins that this random 12-layer model sets by amplifying every f32 rounding several-fold per
layer. This script runs the unmodified transformers Gemma 4 code (its own f32 RMSNorm, RoPE tables and softmax,
default attention) with the model in torch.float32, on exactly the weights of tools/make_f64_goldens.py, and
stores the same tensor set (F32): test/gpu/target-golden.test.ts and assistant.test.ts compare both the engine
and this to the float64 goldens, so a report can say how an f32 engine compares with the library's own f32 run.

usage: python3 tools/make_f32_yardstick.py OUTDIR [--ckpt public/demo]
Writes OUTDIR/transformers-f32.safetensors and OUTDIR/transformers-f32.json
"""
import argparse, json, os
from contextlib import nullcontext
import numpy as np
import torch
import transformers
from safetensors.numpy import save_file
from transformers import Gemma4TextConfig, Gemma4ForCausalLM
from transformers.models.gemma4_assistant import Gemma4AssistantConfig, Gemma4AssistantForCausalLM
from make_f64_goldens import compute, load_into, mlx_weights, sha

F32 = torch.float32


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--ckpt", default="public/demo")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    lines = []

    def log(s):
        print(s, flush=True)
        lines.append(s)

    torch.manual_seed(0)
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, threads {torch.get_num_threads()}")
    tdir, adir = os.path.join(args.ckpt, "target"), os.path.join(args.ckpt, "assistant")
    tconf, aconf = json.load(open(os.path.join(tdir, "config.json"))), json.load(open(os.path.join(adir, "config.json")))
    tc = {k: v for k, v in tconf["text_config"].items() if k != "model_type"}
    # Load the float64 weights (exact dequantization), then cast the whole model: w = s*q + b rounded once to f32.
    target = Gemma4ForCausalLM(Gemma4TextConfig(**tc)).to(torch.float64).eval()
    tw, _ = mlx_weights(os.path.join(tdir, "model.safetensors"), "language_model.", tconf["quantization"]["group_size"])
    load_into(target, tw, "target")
    acfg = Gemma4AssistantConfig(text_config=aconf["text_config"], backbone_hidden_size=aconf["backbone_hidden_size"],
                                 use_ordered_embeddings=aconf.get("use_ordered_embeddings", False))
    asst = Gemma4AssistantForCausalLM(acfg).to(torch.float64).eval()
    aw, _ = mlx_weights(os.path.join(adir, "model.safetensors"), "", aconf["quantization"]["group_size"])
    load_into(asst, aw, "assistant")
    target, asst = target.to(F32), asst.to(F32)
    log(f"attention implementation: target {target.config._attn_implementation}, assistant {asst.config.get_text_config()._attn_implementation}")
    V = tc["vocab_size"]
    prompt = [(7 * i + 1 + 978) % V for i in range(40)]  # make_fixtures.py's prompt
    out, meta = compute(target, asst, prompt, log, nullcontext, dtype=F32)
    log(f"f32: greedy {meta['greedy']}, bonus {meta['bonus_token']}, drafts {meta['draft_tokens']}")
    save_file(out, os.path.join(args.outdir, "transformers-f32.safetensors"),
              metadata={"source": f"transformers {transformers.__version__} Gemma 4 stock code, model in float32 (tools/make_f32_yardstick.py)"})
    json.dump({
        "name": "tiny-a transformers float32 yardstick",
        "transformers": transformers.__version__, "torch": torch.__version__,
        "checkpoint": {"target/model.safetensors": sha(os.path.join(tdir, "model.safetensors")),
                       "assistant/model.safetensors": sha(os.path.join(adir, "model.safetensors"))},
        "prompt": prompt, "bonus_token": meta["bonus_token"], "greedy": meta["greedy"], "draft_tokens": meta["draft_tokens"],
        "log": lines,
    }, open(os.path.join(args.outdir, "transformers-f32.json"), "w"), indent=1)
    log("ok")


if __name__ == "__main__":
    main()
