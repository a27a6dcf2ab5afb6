#!/usr/bin/env bash
# The demo model's one device run (one H200; python3 with torch, transformers 5.17, tokenizers, safetensors, numpy).
# (The fortunes-only recipe of the first runs. tools/demo/device-sweep.sh trains several recipes at once and keeps
# the best; it also needs .demo/manpages.txt.gz: see its header.)
# Prepare here first (Debian's fortunes packages; stages .demo/corpus.txt, .demo/corpus.json, .demo/tools/):
#   apt-get install -y fortunes fortunes-min && python3 tools/demo/make_corpus.py
# then, from the repo root, through the device tool with carry [".demo"]:
#   bash tools/demo/device.sh
# It trains and exports (tools/demo/train_demo.py, ~5 min), then tools/demo/finish_run.sh computes the transformers
# goldens of both variants in parallel on the CPU (tools/make_f64_goldens.py: float64 throughout;
# tools/make_f32_yardstick.py: transformers' own f32 run; on the golden prompt that train_demo.py picked) and writes
# to $OUT (at most 8 files, 16 MiB each):
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
r=0
bash tools/demo/finish_run.sh "$run/demo" "$OUT" || r=$?
[ "$rc" = 0 ] && rc=$r
ls -l "$OUT"
echo "device.sh: rc $rc after $(( $(date +%s) - start )) s"
exit "$rc"
