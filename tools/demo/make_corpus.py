#!/usr/bin/env python3
"""Builds the demo model's training corpus from Debian's fortune cookie files, and stages what the device run needs.

The demo model (tools/demo/train_demo.py) is trained on plain English text that a package registry reachable here
provides under an open licence: Debian main's `fortunes` and `fortunes-min` (fortune-mod's data files, BSD
licence; /usr/share/doc/fortunes/copyright). Install them first, as root:

    apt-get update && apt-get install -y fortunes fortunes-min
    python3 tools/demo/make_corpus.py            # -> .demo/corpus.txt, .demo/corpus.json, .demo/tools/

What it writes (.demo/ is git-ignored; the device call carries it):
- `.demo/corpus.txt`: one fortune per document, documents separated by one blank line. Per fortune: the `%`
  separators dropped, tabs and runs of spaces collapsed, hard-wrapped prose lines joined (a line of 50+
  characters followed by one that does not start a new item), blank lines inside a fortune removed, attributions
  (`-- Author`) kept on their own line. Dropped: the ascii-art/art files, fortunes that are mostly not letters,
  over 1,200 characters, or exact duplicates (after normalization). About 2.5 MB.
- `.demo/corpus.json`: kind "fortunes" (train_demo.py picks the chat-form questions by kind), source packages and
  versions (dpkg-query), files used, document and byte counts, and the corpus's SHA-256 (train_demo.py copies it
  into training.json).
- `.demo/tools/make_tiny_a_fixture.py`: a copy of tools/make_tiny_a_fixture.py (train_demo.py imports its
  quantize/export functions from here, so a run keeps the version it started with) and its SHA-256 in corpus.json.

Pure standard library; runs on this machine (no torch needed).
"""
import argparse, hashlib, json, os, re, shutil, subprocess, sys, unicodedata

FORTUNE_DIR = "/usr/share/games/fortunes"
PACKAGES = ["fortunes", "fortunes-min"]
SKIP_FILES = {"art", "ascii-art", "translate-me"}
MAX_CHARS = 1200


def package_versions(names):
    out = {}
    for n in names:
        try:
            r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", n], capture_output=True, text=True, check=True)
            out[n] = r.stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            out[n] = None
    return out


def package_files(names):
    """Fortune data files shipped by the packages (not the .dat indexes nor the .u8 links)."""
    files = set()
    for n in names:
        try:
            r = subprocess.run(["dpkg", "-L", n], capture_output=True, text=True, check=True)
        except (OSError, subprocess.CalledProcessError):
            continue
        for p in r.stdout.split("\n"):
            if p.startswith(FORTUNE_DIR + "/") and not p.endswith((".dat", ".u8")) and os.path.isfile(p):
                files.add(p)
    return sorted(files)


def split_fortunes(text):
    """The items of one fortune file: separated by lines holding only '%'."""
    items, cur = [], []
    for line in text.split("\n"):
        if line.strip() == "%":
            items.append("\n".join(cur))
            cur = []
        else:
            cur.append(line)
    items.append("\n".join(cur))
    return [i for i in items if i.strip()]


def normalize(item):
    """One fortune as clean text (see the module doc), or None if it is not prose."""
    item = unicodedata.normalize("NFC", item.replace("\r", ""))
    raw_lines = item.split("\n")
    out = []
    prev_len = 0
    for raw in raw_lines:
        indented = raw[:1] in ("\t", " ")
        line = re.sub(r"[ \t]+", " ", raw).strip()
        if not line:
            prev_len = 0
            continue
        starts_item = indented or line.startswith(("--", "-", "*", "(", '"', "Q:", "A:")) or re.match(r"^\d+[.)]", line)
        if out and prev_len >= 50 and not starts_item:
            out[-1] = out[-1] + " " + line
        else:
            out.append(line)
        prev_len = len(raw.expandtabs(8).rstrip())
    text = "\n".join(out).strip()
    if not text or len(text) > MAX_CHARS:
        return None
    letters = sum(ch.isalpha() for ch in text)
    if letters < 0.6 * len(text.replace(" ", "").replace("\n", "")) or letters < 12:
        return None
    return text


def build(files):
    docs, seen, per_file = [], set(), {}
    for path in files:
        name = os.path.basename(path)
        if name in SKIP_FILES:
            continue
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            items = split_fortunes(f.read())
        kept = 0
        for it in items:
            t = normalize(it)
            if t is None or t in seen:
                continue
            seen.add(t)
            docs.append(t)
            kept += 1
        per_file[name] = {"items": len(items), "kept": kept}
    return docs, per_file


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=".demo", help="output folder (default .demo, git-ignored)")
    ap.add_argument("--fixtures-tools", default="tools", help="folder of make_tiny_a_fixture.py to stage")
    args = ap.parse_args()
    versions = package_versions(PACKAGES)
    missing = [p for p, v in versions.items() if not v]
    if missing:
        sys.exit(f"packages not installed: {' '.join(missing)} (apt-get install -y {' '.join(PACKAGES)})")
    files = package_files(PACKAGES)
    docs, per_file = build(files)
    os.makedirs(args.out, exist_ok=True)
    body = "\n\n".join(docs) + "\n"
    data = body.encode("utf-8")
    corpus = os.path.join(args.out, "corpus.txt")
    with open(corpus, "wb") as f:
        f.write(data)
    meta = {
        "kind": "fortunes",
        "source": "Debian main packages " + ", ".join(f"{p} {v}" for p, v in versions.items())
        + " (fortune-mod data files, BSD licence: /usr/share/doc/fortunes/copyright)",
        "packages": versions,
        "files": {os.path.basename(p): per_file.get(os.path.basename(p), "skipped") for p in files},
        "documents": len(docs),
        "bytes": len(data),
        "format": "UTF-8 text; documents separated by one blank line; no blank lines inside a document",
        "sha256": hashlib.sha256(data).hexdigest(),
        "tool": "tools/demo/make_corpus.py",
    }
    src = os.path.join(args.fixtures_tools, "make_tiny_a_fixture.py")
    if os.path.isfile(src):
        os.makedirs(os.path.join(args.out, "tools"), exist_ok=True)
        dst = os.path.join(args.out, "tools", "make_tiny_a_fixture.py")
        shutil.copyfile(src, dst)
        meta["make_fixtures_sha256"] = hashlib.sha256(open(dst, "rb").read()).hexdigest()
    else:
        print(f"warning: {src} not found; train_demo.py needs --fixtures-tools pointing at make_tiny_a_fixture.py", file=sys.stderr)
    with open(os.path.join(args.out, "corpus.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{corpus}: {len(docs)} documents, {len(data):,} bytes, sha256 {meta['sha256']}")


if __name__ == "__main__":
    main()
