#!/usr/bin/env bash
# The demo model's sweep: several training recipes at once on one H200, the best one kept (the goal: >= 40% of MTP
# drafts accepted at K = 4, readable 32-token continuations).
#
# HOW TO RUN
#   here, once (as root; Debian 12; stages .demo/, about 11 MB):
#     apt-get update
#     apt-get install -y --no-install-recommends fortunes fortunes-min $(python3 tools/demo/make_manpages.py --list)
#     python3 tools/demo/make_corpus.py      # .demo/corpus.txt + corpus.json (fortunes), .demo/tools/make_fixtures.py
#     python3 tools/demo/make_manpages.py    # .demo/manpages.txt.gz + manpages.json (5-10 min on 2 cores)
#   then through the device tool (kind nvidia-h200, carry [".demo"], timeout_s 600), from the repo root:
#     bash tools/demo/device-sweep.sh
#
# WHAT IT DOES
#   1. starts the recipes below as parallel processes (tools/demo/train_demo.py, each in .demo/sweep/NAME/, each its
#      own smoke run first, then tokenizer, target (<= TARGET_SECONDS), assistant data, assistant (<= ASST_SECONDS),
#      export, simulated acceptance, samples); a run still going after TRAIN_TIMEOUT seconds is killed;
#   2. tools/demo/pick_recipe.py picks the recipe: best simulated q4 MTP acceptance (rounds, K = 4, mean of the hf and
#      mlxcel conventions) among those whose sample continuations are readable;
#   3. tools/demo/finish_run.sh computes that recipe's transformers goldens (q4 and q8) and packs it.
#
# WHAT IT PRINTS
#   a progress line per recipe every 60 s (the last line of its train.log) and the GPU's memory and utilisation; then
#   per recipe "NAME: q4 round acceptance hf .. mlxcel .. (every anchor ..); readable samples ..; target val loss ..",
#   "chosen: NAME (why)", the goldens' log tails, `ls -l $OUT` and "device-sweep.sh: rc N after S s".
#
# WHAT IT WRITES to $OUT (8 files, each under 16 MiB):
#   demo-q4.tar.gz, demo-q8.tar.gz, goldens-q4.tar.gz, goldens-q8.tar.gz, training.json, train.log
#                      the chosen recipe's, as tools/demo/device.sh writes them (see finish_run.sh)
#   sweep-summary.json every recipe's arguments, losses, acceptance, readability, samples, demo prompt candidates
#   recipes.tar.gz     every recipe's training.json, train.log, stdout.log and exit status, and this script's log
#                      (written before the goldens, as are the demo tarballs: if the device's 600 s limit cuts the
#                      goldens short, the models still come back; finish_run.sh's header says how to make them later)
# Exit status: 0 if a recipe finished and its goldens were made; else the first failure's.
#
# Environment: RECIPES (default "fortunes-6ep man-3ep man-6ep"), TARGET_SECONDS (100), ASST_SECONDS (120),
# FINISH_AT (430), TRAIN_TIMEOUT (480), OUT (/tmp/demo-out). The device tool allows 600 s per command. A recipe
# takes ~400 s (~45 s smoke run, ~40 s tokenizer and streams, the two training budgets, ~60 s greedy data for the
# assistant while the three share the GPU, ~30 s export and samples); each run's assistant budget shrinks so that
# the run ends by FINISH_AT seconds after the start (train_demo.py --finish-by), a run still going at TRAIN_TIMEOUT
# is killed, and the goldens (~1-2 min on the CPU) and packing fit in what is left.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/demo-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True OMP_NUM_THREADS=4 TOKENIZERS_PARALLELISM=true
TS=${TARGET_SECONDS:-100}
AS=${ASST_SECONDS:-120}
FINISH_AT=${FINISH_AT:-430}
TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-480}
RECIPES=${RECIPES:-"fortunes-6ep man-3ep man-6ep"}
sweep=.demo/sweep
rm -rf "$sweep" && mkdir -p "$sweep"
start=$(date +%s)
exec > >(tee "$sweep/sweep.log") 2>&1
FINISH_BY=$((start + FINISH_AT))

# Shared by every recipe: a 256-wide assistant (2 x the first runs'), 32768 greedy sequences of the q4 target
# (8 x), batches of 256 sequences, the time budgets.
COMMON="--fixtures-tools .demo/tools --target-seconds $TS --asst-seconds $AS --asst-hidden 256 --asst-inter 512
  --asst-sequences 32768 --asst-batch 256 --gen-batch 2048 --finish-by $FINISH_BY"
recipe_args() {
  case "$1" in
    # Fortunes only (0.7 M tokens), as the first runs, but the target sees them 6 times, not 50: it should
    # generalise more and recite less; its assistant also trains on 8192 windows of the corpus itself.
    fortunes-6ep) echo "--corpus .demo/corpus.txt --batch 32 --target-lr 1e-3 --target-epochs 6
      --asst-corpus-sequences 8192 --asst-soft 0.5" ;;
    # Manual pages + fortunes (~8 M tokens), 3 passes at batch 128; the assistant learns the target's whole
    # distribution as well as its greedy token (soft-label weight 0.5).
    man-3ep) echo "--corpus .demo/manpages.txt.gz --corpus .demo/corpus.txt --batch 128 --target-epochs 3
      --asst-corpus-sequences 0 --asst-soft 0.5" ;;
    # The same corpus, up to 6 passes at batch 256 (more fluent, closer to reciting); greedy tokens only.
    man-6ep) echo "--corpus .demo/manpages.txt.gz --corpus .demo/corpus.txt --batch 256 --target-epochs 6
      --asst-corpus-sequences 0 --asst-soft 0" ;;
    *) echo "unknown recipe $1" >&2; return 1 ;;
  esac
}

for f in .demo/corpus.txt .demo/manpages.txt.gz .demo/tools/make_fixtures.py; do
  [ -f "$f" ] || { echo "missing $f: prepare .demo here first (see the header of $0)"; exit 2; }
done
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
pids=()
for r in $RECIPES; do
  a=$(recipe_args "$r") || exit 2
  mkdir -p "$sweep/$r"
  # shellcheck disable=SC2086  # the recipe's arguments are words
  ( timeout -k 15 "$TRAIN_TIMEOUT" python3 tools/demo/train_demo.py --recipe "$r" --out "$sweep/$r/demo" $COMMON $a \
      > "$sweep/$r/stdout.log" 2>&1; echo $? > "$sweep/$r/rc" ) &
  pids+=($!)
  echo "started $r: train_demo.py $(echo $COMMON $a | tr -s ' \n' ' ')"
done
while :; do
  left=0
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
  [ "$left" = 0 ] && break
  sleep 20
  el=$(( $(date +%s) - start ))
  if [ $(( el % 60 )) -lt 20 ]; then
    echo "--- ${el} s: $left running; GPU $(nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader 2>/dev/null)"
    for r in $RECIPES; do
      l=$(tail -n 1 "$sweep/$r/demo/train.log" 2>/dev/null || tail -n 1 "$sweep/$r/stdout.log" 2>/dev/null)
      echo "  $r: ${l:0:170}"
    done
  fi
done
for r in $RECIPES; do echo "$r: exit status $(cat "$sweep/$r/rc" 2>/dev/null || echo '?')"; done
echo "recipes done after $(( $(date +%s) - start )) s"

rc=0
chosen=$(python3 tools/demo/pick_recipe.py "$sweep" --summary "$OUT/sweep-summary.json" | tail -n 1) || rc=1
files=(sweep.log)
for r in $RECIPES; do
  for f in "$r/demo/training.json" "$r/demo/train.log" "$r/stdout.log" "$r/rc"; do [ -f "$sweep/$f" ] && files+=("$f"); done
done
tar -czf "$OUT/recipes.tar.gz" -C "$sweep" "${files[@]}"  # before the goldens: the device's time limit may come first
if [ -n "$chosen" ] && [ "$rc" = 0 ]; then
  el=$(( $(date +%s) - start ))
  gt=$(( 585 - el ))  # what is left of the device's 600 s, less the packing
  [ "$gt" -lt 30 ] && gt=30
  echo "finish_run.sh on $chosen after $el s (goldens stopped after ${GOLDENS_TIMEOUT:-$gt} s)"
  GOLDENS_TIMEOUT=${GOLDENS_TIMEOUT:-$gt} bash tools/demo/finish_run.sh "$sweep/$chosen/demo" "$OUT" || rc=$?
else
  echo "no recipe finished: no model to pack"
  for r in $RECIPES; do echo "== $r stdout (tail)"; tail -n 15 "$sweep/$r/stdout.log" 2>/dev/null; done
fi
ls -l "$OUT"
echo "device-sweep.sh: rc $rc after $(( $(date +%s) - start )) s"
exit "$rc"
