#!/usr/bin/env python3
"""Picks the demo model among the recipes of one device sweep (tools/demo/device-sweep.sh) and summarises them all.

usage: python3 tools/demo/pick_recipe.py SWEEP_DIR [--summary FILE] [--min-readable 0.6]
SWEEP_DIR holds one folder per recipe: NAME/demo/training.json (tools/demo/train_demo.py's record; absent or with an
`error` when the run failed), NAME/rc (the run's exit status, written by device-sweep.sh), NAME/stdout.log.

The choice: among the recipes that finished (training.json without `error`, with both variants' simulated
acceptance) and whose sample continuations are readable (samples_readable_share >= --min-readable: share of the
sample prompts whose 32-token greedy continuation passes train_demo.py's readability()), the one with the highest
simulated MTP acceptance of the shipped q4 variant at K = 4, the rounds the app runs (round_rate), averaged over
the two draft-position conventions (hf, mlxcel). If no recipe is readable enough: the most readable, then the
best acceptance. Prints the chosen recipe's name as the last line of stdout (nothing, exit status 1, if none
finished) and writes the summary JSON: every recipe's arguments, losses, acceptance (q4 and q8, hf and mlxcel,
every-anchor rate and round rate, step hits), readability, samples, demo prompt candidates, timings, errors.
Standard library only.
"""
import argparse, json, os, sys

ARG_KEYS = ("corpus", "target_seconds", "target_epochs", "batch", "seq", "target_lr", "asst_seconds", "asst_batch",
            "asst_lr", "asst_sequences", "asst_corpus_sequences", "asst_hidden", "asst_inter", "asst_soft", "chat_frac")


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def acc_figures(sim):
    """hf/mlxcel: rate, round_rate, step_hit from one simulated_acceptance record."""
    return {c: {k: sim[c].get(k) for k in ("rate", "round_rate", "step_hit", "walked_tokens_per_round")} for c in ("hf", "mlxcel") if c in sim}


def summarise(name, folder):
    rec = {"recipe": name}
    rc = None
    try:
        with open(os.path.join(folder, "rc")) as f:
            rc = int(f.read().strip() or "-1")
    except (OSError, ValueError):
        pass
    rec["rc"] = rc
    tj = read_json(os.path.join(folder, "demo", "training.json"))
    if tj is None:
        rec["finished"] = False
        rec["error"] = f"no training.json (exit status {rc}; see stdout.log)"
        return rec
    rec["args"] = {k: tj.get("args", {}).get(k) for k in ARG_KEYS}
    if "error" in tj or "variants" not in tj or any("simulated_acceptance" not in v for v in tj["variants"].values()):
        rec["finished"] = False
        rec["error"] = (tj.get("error") or "incomplete training.json")[-2000:]
        return rec
    rec["finished"] = True
    t, a = tj["target"], tj["assistant"]
    rec["target"] = {k: t.get(k) for k in ("steps", "max_steps", "epochs", "tokens_seen", "final_train_loss", "final_val_loss", "seconds")}
    rec["target"].update({f"{v}_val_loss": tj["variants"][v].get("target_val_loss") for v in tj["variants"]})
    rec["corpus"] = {k: tj["corpus"].get(k) for k in ("path", "bytes", "documents", "train_tokens", "val_tokens")}
    rec["assistant"] = {k: a.get(k) for k in ("parameters", "steps", "seconds", "final_loss", "soft_label_weight", "kept_step",
                                              "kept_select_acceptance_hf", "last_select_acceptance_hf", "soft_label_check_max_abs")}
    rec["assistant"]["unquantized_val"] = acc_figures(a.get("unquantized_val_acceptance", {}))
    rec["assistant"]["unquantized_recite"] = acc_figures(a.get("unquantized_recite_acceptance", {}))
    rec["acceptance"] = {v: acc_figures(tj["variants"][v]["simulated_acceptance"]) for v in tj["variants"]}
    q4 = rec["acceptance"]["q4"]
    rec["score"] = round(sum(q4[c]["round_rate"] for c in q4) / len(q4), 4)
    rec["readable_share"] = tj.get("samples_readable_share")
    rec["samples"] = [{"prompt": s["prompt"], "text": s["text"], "readable": s["readability"]["ok"],
                       "mtp_round_rate_hf": s.get("mtp", {}).get("hf", {}).get("round_rate")} for s in tj.get("samples", [])]
    rec["demo_prompt_candidates"] = tj.get("demo_prompt_candidates", [])[:3]
    rec["golden_prompt"] = {k: tj.get("golden_prompt", {}).get(k) for k in ("prompt_text", "greedy_text_f32", "min_top1_gap_f32")}
    rec["timings_s"] = tj.get("timings_s")
    return rec


def choose(recs, min_readable):
    done = [r for r in recs if r.get("finished")]
    if not done:
        return None, "no recipe finished"
    ok = [r for r in done if (r.get("readable_share") or 0) >= min_readable]
    if ok:
        best = max(ok, key=lambda r: r["score"])
        return best, f"best q4 MTP round acceptance ({best['score']:.3f}, mean of hf and mlxcel) of the {len(ok)} recipes with readable samples (share >= {min_readable})"
    best = max(done, key=lambda r: ((r.get("readable_share") or 0), r["score"]))
    return best, f"no recipe had readable samples (share >= {min_readable}): the most readable ({best.get('readable_share')}), then the best acceptance"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep_dir")
    ap.add_argument("--summary", default=None, help="write the summary JSON here")
    ap.add_argument("--min-readable", type=float, default=0.6)
    args = ap.parse_args()
    names = sorted(n for n in os.listdir(args.sweep_dir) if os.path.isdir(os.path.join(args.sweep_dir, n)))
    recs = [summarise(n, os.path.join(args.sweep_dir, n)) for n in names]
    best, why = choose(recs, args.min_readable)
    summary = {"tool": "tools/demo/pick_recipe.py", "chosen": best["recipe"] if best else None, "why": why,
               "goal": "q4 MTP acceptance >= 0.40 at K = 4 with readable 32-token continuations",
               "recipes": recs}
    for r in recs:
        if r.get("finished"):
            q4 = r["acceptance"]["q4"]
            print(f"{r['recipe']}: q4 round acceptance hf {q4['hf']['round_rate']:.3f} mlxcel {q4['mlxcel']['round_rate']:.3f} "
                  f"(every anchor hf {q4['hf']['rate']:.3f}); readable samples {r['readable_share']}; target val loss "
                  f"{r['target']['final_val_loss']} train {r['target']['final_train_loss']} after {r['target']['epochs']} epochs", file=sys.stderr)
        else:
            print(f"{r['recipe']}: did not finish (rc {r['rc']}): {r['error'].strip().splitlines()[-1] if r['error'].strip() else ''}", file=sys.stderr)
    print(f"chosen: {summary['chosen']} ({why})", file=sys.stderr)
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump(summary, f, indent=1)
    if best is None:
        sys.exit(1)
    print(best["recipe"])


if __name__ == "__main__":
    main()
