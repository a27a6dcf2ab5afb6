"""What transformers itself achieves in float32 on the tiny-a fixture: the yardstick for the engine's NMSE.

The acceptance bounds of the engine (act.* and the drafter's projected hidden within NMSE 1e-8 of float64) are
met or missed by margins that this random 12-layer model sets by amplifying every f32 rounding several-fold per
layer. This script runs the unmodified transformers Gemma 4 code (its own f32 RMSNorm, RoPE tables and softmax,
default attention) with the model in torch.float32, on exactly the weights of tools/make_f64_goldens.py, and
stores the same tensor set (F32): test/gpu/target-golden.test.ts and assistant.test.ts compare both the engine
and this to the float64 goldens, so a report can say how an f32 engine compares with the library's own f32 run.

usage: python3 tools/make_f32_yardstick.py OUTDIR [--ckpt test/fixtures/tiny-a] [--prompt-file P.json] [--label NAME]
Writes OUTDIR/transformers-f32.safetensors and OUTDIR/transformers-f32.json
"""
import json, os
from contextlib import nullcontext
import torch
import transformers
from safetensors.numpy import save_file
from make_f64_goldens import compute, load_fixture, start_run

F32 = torch.float32


def main():
    args, log, lines = start_run()
    # The float64 models with the exact dequantized weights, then cast whole: w = s*q + b rounded once to f32.
    target, asst, _, prompt, checkpoint = load_fixture(args.ckpt, log, args.prompt)
    target, asst = target.to(F32), asst.to(F32)
    log(f"attention implementation: target {target.config._attn_implementation}, assistant {asst.config.get_text_config()._attn_implementation}")
    out, meta = compute(target, asst, prompt, log, nullcontext, dtype=F32)
    log(f"f32: greedy {meta['greedy']}, bonus {meta['bonus_token']}, drafts {meta['draft_tokens']}")
    save_file(out, os.path.join(args.outdir, "transformers-f32.safetensors"),
              metadata={"source": f"transformers {transformers.__version__} Gemma 4 stock code, model in float32 (tools/make_f32_yardstick.py)"})
    json.dump({
        "name": f"{args.label} transformers float32 yardstick",
        "transformers": transformers.__version__, "torch": torch.__version__,
        "checkpoint": checkpoint,
        "prompt": prompt, "bonus_token": meta["bonus_token"], "greedy": meta["greedy"], "draft_tokens": meta["draft_tokens"],
        "log": lines,
    }, open(os.path.join(args.outdir, "transformers-f32.json"), "w"), indent=1)
    log("ok")


if __name__ == "__main__":
    main()
