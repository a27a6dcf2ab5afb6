#!/usr/bin/env bash
# The demo run's last stage (device.sh and device-sweep.sh): model tarballs, transformers goldens of both variants,
# goldens tarballs (the models first, so that a run cut short by the device's time limit still returns them).
# usage: bash tools/demo/finish_run.sh RUN_DIR OUT_DIR      (from the repo root; RUN_DIR: train_demo.py's --out)
# Writes to OUT_DIR:
#   training.json, train.log          (also inside the tarballs)
#   demo-q4.tar.gz, demo-q8.tar.gz    q4|q8/{target,assistant}/* (target holds tokenizer.json), training.json,
#                                     golden_prompt.json, tokenizer/ (with tokenizer-expect.json)
#   goldens-q4.tar.gz, goldens-q8.tar.gz   q4|q8/goldens/{golden.safetensors,golden.json,transformers-f32.*,*.log}
# Goldens (only if RUN_DIR/golden_prompt.json exists): tools/make_f64_goldens.py (float64 throughout) and
# tools/make_f32_yardstick.py (transformers' own f32 run) on the golden prompt, for q4 and q8, four CPU processes in
# parallel (4 threads each), each stopped after GOLDENS_TIMEOUT seconds (default 200).
# To make the goldens alone later (a second device call): extract demo-q4.tar.gz and demo-q8.tar.gz into a folder
# under .demo/ (it then holds q4/, q8/, training.json, golden_prompt.json), carry .demo, run this script on it.
# Whatever fails, the tarballs of what exists are still written; the exit status is that of the first failure.
set -uo pipefail
d=${1:?usage: finish_run.sh RUN_DIR OUT_DIR}
OUT=${2:?usage: finish_run.sh RUN_DIR OUT_DIR}
mkdir -p "$OUT"
rc=0
start=$(date +%s)
cp "$d/training.json" "$d/train.log" "$OUT/" 2>/dev/null
for v in q4 q8; do
  extra=()
  for f in training.json golden_prompt.json tokenizer; do [ -e "$d/$f" ] && extra+=("$f"); done
  [ -d "$d/$v/target" ] && tar -czf "$OUT/demo-$v.tar.gz" -C "$d" --exclude goldens "$v" "${extra[@]}"
done
GT=${GOLDENS_TIMEOUT:-200}
if [ -f "$d/golden_prompt.json" ]; then
  pids=()
  for v in q4 q8; do
    g="$d/$v/goldens"
    mkdir -p "$g"
    OMP_NUM_THREADS=4 timeout -k 10 "$GT" python3 tools/make_f64_goldens.py "$g" --ckpt "$d/$v" \
      --prompt-file "$d/golden_prompt.json" --label "demo-$v" > "$g/make_f64_goldens.log" 2>&1 &
    pids+=($!)
    OMP_NUM_THREADS=4 timeout -k 10 "$GT" python3 tools/make_f32_yardstick.py "$g" --ckpt "$d/$v" \
      --prompt-file "$d/golden_prompt.json" --label "demo-$v" > "$g/make_f32_yardstick.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { r=$?; [ "$rc" = 0 ] && rc=$r; }; done
  for v in q4 q8; do
    for l in "$d/$v/goldens/"*.log; do echo "== $l"; tail -n 4 "$l"; done
    rm -f "$d/$v/goldens/check_stock.safetensors"  # the unpatched run's tensors: only its log matters here
  done
  echo "goldens: rc $rc after $(( $(date +%s) - start )) s"
else
  echo "finish_run.sh: no $d/golden_prompt.json: no goldens"
  rc=2
fi
for v in q4 q8; do
  [ -d "$d/$v/goldens" ] && tar -czf "$OUT/goldens-$v.tar.gz" -C "$d" "$v/goldens"
done
exit "$rc"
