#!/usr/bin/env python3
"""Compact goldens of the demo model for test/fixtures/demo/ (test/gpu/demo-golden.test.ts reads them).

tools/demo/device.sh writes the full goldens of each variant (q4/goldens/: golden.safetensors 8 MB, float64 throughout,
from tools/make_f64_goldens.py; transformers-f32.safetensors 4 MB, transformers' own float32 run, from
tools/make_f32_yardstick.py). The repository keeps a subset of the q4 variant's, the one in public/demo:
  - golden.safetensors (F64, token ids I32): prompt [48], greedy [32], draft.tokens [3], logits_rows [R] (the prompt
    positions kept), logits [R, V] (those rows of the float64 prompt logits), act.final_norm [48, H];
  - transformers-f32.safetensors (F32): the same logits rows and act.final_norm from the float32 yardstick, so that the
    tests bound the engine's error by what transformers reaches in f32, as the tiny-a tests do;
  - golden.json, transformers-f32.json: the source files' metadata (checkpoint sha256, greedy, draft, HF's MTP rounds,
    logs) less the bulky parts, plus the rows kept and the sha256 of the source files.
Rows kept: every 4th position before the ring wraps (0, 4, ..., 28) and every position from W - 1 = 31 to the last
(47), where the 32-slot sliding ring has wrapped; R = 25, about 1.4 MB in all.

usage: python3 tools/demo/extract_goldens.py GOLDENS_DIR [OUTDIR]   (default OUTDIR test/fixtures/demo)
then `npx biome check --write test/fixtures/demo` (the JSON files in Biome's layout). Needs numpy only. GOLDENS_DIR is q4/goldens/ from goldens-q4.tar.gz of the device run.
"""
import hashlib, json, os, struct, sys
import numpy as np

DTYPES = {"F64": np.float64, "F32": np.float32, "I32": np.int32, "I64": np.int64}
NAMES = {np.dtype(v): k for k, v in DTYPES.items()}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[8 + n + a:8 + n + b], dtype=DTYPES[v["dtype"]]).reshape(v["shape"])
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for k in sorted(tensors):
        a = np.ascontiguousarray(tensors[k])
        b = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[k] = {"dtype": NAMES[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main(src, out):
    g = read_safetensors(os.path.join(src, "golden.safetensors"))
    t = read_safetensors(os.path.join(src, "transformers-f32.safetensors"))
    gj = json.load(open(os.path.join(src, "golden.json")))
    tj = json.load(open(os.path.join(src, "transformers-f32.json")))
    T = g["logits"].shape[0]
    rows = sorted(set(range(0, 29, 4)) | set(range(31, T)))
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "golden.safetensors"), {
        "prompt": g["prompt"], "greedy": g["greedy"], "draft.tokens": g["draft.tokens"],
        "logits_rows": np.array(rows, dtype=np.int32), "logits": g["logits"][rows].astype(np.float64),
        "act.final_norm": g["act.final_norm"].astype(np.float64)})
    write_safetensors(os.path.join(out, "transformers-f32.safetensors"), {
        "logits": t["logits"][rows].astype(np.float32), "act.final_norm": t["act.final_norm"].astype(np.float32)})
    sources = {n: sha256(os.path.join(src, n)) for n in ("golden.safetensors", "transformers-f32.safetensors")}
    meta = {k: v for k, v in gj.items() if k not in ("log", "sha256")}
    meta["compact"] = {
        "tool": "tools/demo/extract_goldens.py",
        "logits_rows": rows,
        "tensors": "prompt, greedy, draft.tokens, logits_rows, logits[logits_rows], act.final_norm",
        "source_sha256": sources,
    }
    json.dump(meta, open(os.path.join(out, "golden.json"), "w"), indent=1)
    tmeta = dict(tj)
    tmeta["compact"] = {"tensors": "logits[logits_rows] (rows as golden.json), act.final_norm", "source_sha256": sources}
    json.dump(tmeta, open(os.path.join(out, "transformers-f32.json"), "w"), indent=1)
    # What the yardstick reaches on what is kept (the tests' bounds), for the log.
    L, Y = g["logits"][rows], t["logits"][rows].astype(np.float64)
    nmse = lambda a, b: float(((a - b) ** 2).sum() / (b ** 2).sum())
    print(f"rows {rows}")
    print(f"transformers f32 vs float64: logits max abs {np.abs(Y - L).max():.3e}, NMSE {nmse(Y, L):.3e}; "
          f"act.final_norm NMSE {nmse(t['act.final_norm'].astype(np.float64), g['act.final_norm']):.3e}")
    for n in sorted(os.listdir(out)):
        print(f"{n}: {os.path.getsize(os.path.join(out, n)):,} bytes")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else "test/fixtures/demo")
