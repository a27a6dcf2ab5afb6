#!/usr/bin/env bash
# The demo model's one device run (one H200; python3 with torch, transformers 5.17, tokenizers, safetensors, numpy).
# Prepare here first (Debian's fortunes packages; stages .demo/corpus.txt, .demo/corpus.json, .demo/tools/):
#   apt-get install -y fortunes fortunes-min && python3 tools/demo/make_corpus.py
# then, from the repo root, through the device tool with carry [".demo"]:
#   bash tools/demo/device.sh
# It trains and exports (tools/demo/train_demo.py, ~5 min), computes the transformers goldens of both variants in
# parallel on the CPU (tools/make_f64_goldens.py: float64 throughout; tools/make_f32_yardstick.py: transformers' own
# f32 run; on the golden prompt that train_demo.py picked), and writes to $OUT (at most 8 files, 16 MiB each):
#   demo-q4.tar.gz, demo-q8.tar.gz    q4|q8/{target,assistant}/* (target holds tokenizer.json), training.json,
#                                     golden_prompt.json, tokenizer/ (with tokenizer-expect.json)
#   goldens-q4.tar.gz, goldens-q8.tar.gz   q4|q8/goldens/{golden.safetensors,golden.json,transformers-f32.*,*.log}
#   training.json, train.log          (also inside the tarballs)
# Whatever step fails, the tarballs of what exists are still written; the exit status is that of the first failure.
# Environment: TARGET_SECONDS (100) and ASST_SECONDS (150) bound the two training loops.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/demo-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
run=.demo/run
rm -rf "$run" && mkdir -p "$run/demo"
rc=0
start=$(date +%s)
python3 tools/demo/train_demo.py --corpus .demo/corpus.txt --fixtures-tools .demo/tools --out "$run/demo" \
  --target-seconds "${TARGET_SECONDS:-100}" --asst-seconds "${ASST_SECONDS:-150}" || rc=$?
echo "train_demo.py: rc $rc after $(( $(date +%s) - start )) s"
if [ "$rc" = 0 ] && [ -f "$run/demo/golden_prompt.json" ]; then
  pids=()
  for v in q4 q8; do
    g="$run/demo/$v/goldens"
    mkdir -p "$g"
    OMP_NUM_THREADS=4 python3 tools/make_f64_goldens.py "$g" --ckpt "$run/demo/$v" \
      --prompt-file "$run/demo/golden_prompt.json" --label "demo-$v" > "$g/make_f64_goldens.log" 2>&1 &
    pids+=($!)
    OMP_NUM_THREADS=4 python3 tools/make_f32_yardstick.py "$g" --ckpt "$run/demo/$v" \
      --prompt-file "$run/demo/golden_prompt.json" --label "demo-$v" > "$g/make_f32_yardstick.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { r=$?; [ "$rc" = 0 ] && rc=$r; }; done
  for v in q4 q8; do
    for l in "$run/demo/$v/goldens/"*.log; do echo "== $l"; tail -n 4 "$l"; done
    rm -f "$run/demo/$v/goldens/check_stock.safetensors"  # the unpatched run's tensors: only its log matters here
  done
  echo "goldens: rc $rc after $(( $(date +%s) - start )) s"
fi
d="$run/demo"
cp "$d/training.json" "$d/train.log" "$OUT/" 2>/dev/null
for v in q4 q8; do
  extra=()
  for f in training.json golden_prompt.json tokenizer; do [ -e "$d/$f" ] && extra+=("$f"); done
  [ -d "$d/$v/target" ] && tar -czf "$OUT/demo-$v.tar.gz" -C "$d" --exclude goldens "$v" "${extra[@]}"
  [ -d "$d/$v/goldens" ] && tar -czf "$OUT/goldens-$v.tar.gz" -C "$d" "$v/goldens"
done
ls -l "$OUT"
echo "device.sh: rc $rc after $(( $(date +%s) - start )) s"
exit "$rc"
