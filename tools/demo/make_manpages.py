#!/usr/bin/env python3
"""Builds the demo model's second corpus: the English prose of Debian manual pages, rendered to plain text.

Why: trained on Debian's fortunes alone (~0.7 M tokens) for minutes, the demo target memorises its corpus, and an
assistant cannot draft a reciting target's next tokens (that knowledge lives in the target's MLP weights). A corpus
of tens of millions of tokens that the target sees only a few times makes it generalise, and its greedy output
becomes predictable from local context, which an MTP assistant can learn (the goal: >= 40% of drafts accepted).

Packages: every installed package with English manual pages that passes the checks below; INSTALL names the ones
installed for this (prose-heavy documentation, all in Debian main). First, as root:

    apt-get update && apt-get install -y --no-install-recommends $(python3 tools/demo/make_manpages.py --list)
    python3 tools/demo/make_manpages.py          # -> .demo/manpages.txt.gz, .demo/manpages.json

Checks per package (a package that fails is left out, and manpages.json says why):
- Debian main: `apt-cache policy` lists the package in a debian.org archive's main component (this leaves out,
  e.g., third-party repositories' packages; an installed version that the archive has since replaced still counts);
- licence: /usr/share/doc/PKG/copyright exists and licence_ok() passes: for machine-readable (DEP-5) files every
  `License:` short name (split at "or", "and", ", "; "with ... exception" dropped) starts with one of
  FREE_LICENSES (permissive or copyleft licences that allow redistribution) and none contains a DENY name; for
  free-text files one of GRANTS (phrases granting redistribution) occurs in the text and no DENY name does.
manpages.json records, per package: version (dpkg-query), archive lines, licences (or the grant phrases found), the
copyright file's SHA-256, pages, pages kept, documents and bytes.

Rendering: each page (the real files of the package's /usr/share/man/man[1-9]* English pages; no `.so` aliases,
no symlinks) through `groff -mandoc -Tutf8 -k -t -P-cbou -rLL=5000n` (preconv + tbl; plain text without
overstriking; a line length so long that each paragraph is one line, so nothing is hyphenated or justified).
Kept: prose lines only (prose_line(): 6+ words, mostly lowercase dictionary-like words, starts like a sentence,
ends with . ! ? or :), i.e. descriptions, not synopses, option tables, code or headings. A page's kept lines in
order form its documents (split at line boundaries into documents of at most MAX_DOC_CHARS); a line already
kept from an earlier page is dropped (boilerplate). Documents of fewer than MIN_DOC_CHARS are dropped.

Output: `.demo/manpages.txt.gz` (UTF-8; documents separated by one blank line, no blank line inside a document,
the format of make_corpus.py's corpus.txt; gzip with mtime 0, so the same text gives the same bytes) and
`.demo/manpages.json` (kind "manpages", source, packages, per-package records, documents, bytes, the text's SHA-256).
Pure standard library plus groff; runs on this machine.
"""
import argparse, concurrent.futures, gzip, hashlib, io, json, os, re, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_corpus import package_versions  # noqa: E402

# Packages installed for their manual pages (mostly English prose), all in Debian main; `--list` prints them for
# apt-get. Every other installed package with English manual pages is taken too when it passes the same checks.
INSTALL = [
    "manpages", "manpages-dev", "perl-doc", "libssl-doc", "openssl", "git-man", "libcurl4-doc", "libpcre2-dev",
    "ncurses-doc", "debhelper", "zsh-common", "gawk", "tcl8.6-doc", "tk8.6-doc", "libx11-doc", "groff",
    "erlang-manpages", "mutt", "mercurial-common", "tcsh", "screen", "lftp", "libpcap0.8-dev", "tcpdump",
    "cryptsetup-bin", "bind9-utils", "cups-client", "iptables", "nftables",
]
# Phrases of free-text (not DEP-5) copyright files that grant redistribution: one must occur in the file.
GRANTS = (
    "hereby grant permission to use, copy, modify, distribute", "Permission is hereby granted",
    "Permission to use, copy, modify, and distribute", "Redistribution and use in source and binary forms",
    "GNU General Public License", "GNU Lesser General Public License", "GNU Library General Public License",
    "Apache License", "Artistic License", "placed in the public domain", "released into the public domain",
)
# DEP-5 short names (prefix match, case-insensitive) of licences that allow redistribution; "X or Y" and "X and Y"
# and "X with Z exception" are split and each part must match.
FREE_LICENSES = (
    "GPL", "LGPL", "AGPL", "GFDL-NIV", "BSD", "Expat", "MIT", "X11", "ISC", "Apache", "Artistic", "CC0",
    "public-domain", "Zlib", "curl", "PostgreSQL", "FSF", "Linux-man-pages", "Boost", "EDL", "Zsh", "PWS-Zsh-FAQ",
    "permissive", "Latex2e", "Unicode", "BZIP", "HSIEH", "REGCOMP", "RRA-KEEP-THIS-NOTICE", "SDBM-PUBLIC-DOMAIN",
    "TEXT-TABS", "DONT-CHANGE-THE-GPL", "dlmalloc", "mingw-runtime", "OLDAP", "BSLA", "unlimited", "preserve-copyright",
    "retain-copyright", "RSA", "MPL", "ICU", "SIL-1.1",
)
DENY = ("non-free", "nmap-GPL", "NPSL", "proprietary", "CC-BY-NC", "CC-BY-ND")
MAX_DOC_CHARS = 3000
MIN_DOC_CHARS = 160
GROFF = ["groff", "-mandoc", "-Tutf8", "-k", "-t", "-P-cbou", "-rLL=5000n"]
WORD = re.compile(r"[(\"'‘“]*[A-Za-z][a-z]*(?:['’-][a-z]+)*[.,;:!?)\"'’”]*")


def license_names(text):
    names = []
    for line in text.split("\n"):
        if line.startswith("License:"):
            v = line[len("License:"):].strip()
            if v:
                names.append(v)
    return sorted(set(names))


def licence_ok(text):
    """(ok, licences, why): whether a copyright file allows redistribution (see the module doc)."""
    if text.startswith("Format:") or "\nFormat:" in text[:400]:
        names = license_names(text)
        if not names:
            return False, [], "DEP-5 file without License: fields"
        if any(d.lower() in n.lower() for n in names for d in DENY):
            return False, names, "a denied licence name"
        bad = []
        for n in names:
            for part in re.split(r",? and |,? or |, ", n):
                part = re.sub(r" with .*$", "", part.strip()).strip()
                if part and not any(part.lower().startswith(f.lower()) for f in FREE_LICENSES):
                    bad.append(part)
        if bad:
            return False, names, f"unrecognised licence names {sorted(set(bad))}"
        return True, names, "DEP-5 licences all free"
    if any(d.lower() in text.lower() for d in DENY):
        return False, [], "a denied licence name occurs in the free-text copyright file"
    low = " ".join(text.lower().split())
    hits = [g for g in GRANTS if g.lower() in low]
    if hits:
        return True, [f"free text: {g!r}" for g in hits], "free-text copyright file grants redistribution"
    return False, [], "free-text copyright file without a known grant of redistribution"


def archive_of(pkg):
    """The archives apt knows the package from (apt-cache policy's version table), e.g.
    {'installed': ['deb.debian.org/debian bookworm/main'], 'any': [...]}: the installed version's and any version's."""
    try:
        out = subprocess.run(["apt-cache", "policy", pkg], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"installed": [], "any": []}
    inst, found = False, {"installed": [], "any": []}
    for ln in out.split("\n"):
        if re.match(r"^ (\*\*\*| {3}) \S+ \d+", ln):
            inst = ln.startswith(" ***")
            continue
        m = re.match(r"^\s+\d+ (https?://\S+) (\S+)", ln)
        if m:
            a = m.group(1).split("://", 1)[1].rstrip("/") + " " + m.group(2)
            for k in ("installed", "any") if inst else ("any",):
                if a not in found[k]:
                    found[k].append(a)
    return found


def installed_with_pages():
    """{package name (without :arch): its English manual pages}: real files under /usr/share/man/manN/ (no
    symlinks), from dpkg's file lists."""
    out = {}
    info = "/var/lib/dpkg/info"
    for fn in sorted(os.listdir(info)):
        if not fn.endswith(".list"):
            continue
        pages = []
        for ln in open(os.path.join(info, fn), encoding="utf-8", errors="replace").read().split("\n"):
            if re.match(r"^/usr/share/man/man[1-9][^/]*/[^/]+$", ln) and os.path.isfile(ln) and not os.path.islink(ln):
                pages.append(ln)
        if pages:
            out.setdefault(fn[:-len(".list")].split(":")[0], []).extend(pages)
    return {k: sorted(set(v)) for k, v in out.items()}


def read_page(path):
    data = open(path, "rb").read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    return data


def render(path):
    src = read_page(path)
    if src.lstrip().startswith(b".so "):
        return None  # an alias of another page
    r = subprocess.run(GROFF, input=src, capture_output=True, timeout=60)
    return r.stdout.decode("utf-8", errors="replace")


def prose_line(line):
    """The line as one clean sentence-like paragraph, or None (see the module doc)."""
    s = line.strip()
    if not s or line[:1] not in (" ",) or "   " in s or "\ufffd" in s:
        return None
    s = re.sub(r"(?<=[.!?:)\"”’]) {2}", " ", s)
    s = s.replace("‐", "-")  # groff's hyphen (U+2010) as ASCII
    words = s.split(" ")
    if len(words) < 6 or not (s[0].isupper() or s[0] in "\"'‘“("):
        return None
    if s[-1] not in ".!?:" or s.endswith(("...", "::")):
        return None
    good = sum(1 for w in words if WORD.fullmatch(w))
    if good < 0.75 * len(words):
        return None
    letters = sum(ch.isalpha() for ch in s)
    if letters < 0.7 * len(s.replace(" ", "")):
        return None
    return s


def page_docs(text, seen):
    kept = []
    for line in text.split("\n"):
        p = prose_line(line)
        if p is None or p in seen:
            continue
        seen.add(p)
        kept.append(p)
    docs, cur, n = [], [], 0
    for p in kept:
        if cur and n + len(p) + 1 > MAX_DOC_CHARS:
            docs.append("\n".join(cur))
            cur, n = [], 0
        if len(p) > MAX_DOC_CHARS:
            continue  # a single paragraph longer than a document: rare, and mostly lists flattened into one line
        cur.append(p)
        n += len(p) + 1
    if cur:
        docs.append("\n".join(cur))
    return [d for d in docs if len(d) >= MIN_DOC_CHARS]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=".demo", help="output folder (default .demo, git-ignored)")
    ap.add_argument("--list", action="store_true", help="print the package names (for apt-get install) and exit")
    ap.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    ap.add_argument("--max-pages", type=int, default=0, help="render at most this many pages per package (0: all; for trials)")
    args = ap.parse_args()
    if args.list:
        print(" ".join(INSTALL))
        return
    missing = [p for p, v in package_versions(INSTALL).items() if not v]
    if missing:
        sys.exit(f"packages not installed: {' '.join(missing)} (apt-get install -y --no-install-recommends {' '.join(missing)})")
    candidates = installed_with_pages()
    versions = package_versions(sorted(candidates))
    records, jobs, pkgs = {}, [], []
    for pkg, pages in sorted(candidates.items()):
        cpath = f"/usr/share/doc/{pkg}/copyright"
        if not os.path.isfile(cpath):
            records[pkg] = {"version": versions[pkg], "pages": len(pages), "excluded": f"no {cpath}"}
            continue
        ctext = open(cpath, encoding="utf-8", errors="replace").read()
        ok, lic, why = licence_ok(ctext)
        arch = archive_of(pkg)
        rec = {"version": versions[pkg], "archive": arch, "licences": lic, "licence_check": why,
               "copyright_sha256": hashlib.sha256(ctext.encode("utf-8")).hexdigest(), "pages": len(pages)}
        if not ok:
            rec["excluded"] = why
        elif not any("debian.org" in a and "/main" in a for a in arch["any"]):
            rec["excluded"] = "not a package of a Debian main archive (apt-cache policy)"
        records[pkg] = rec
        if "excluded" in rec:
            print(f"excluded {pkg} ({len(pages)} pages): {rec['excluded']}", file=sys.stderr)
            continue
        if args.max_pages:
            pages = pages[: args.max_pages]
        pkgs.append(pkg)
        jobs += [(pkg, p) for p in pages]
    print(f"rendering {len(jobs)} pages of {len(pkgs)} packages with {args.jobs} jobs ...", file=sys.stderr)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        rendered = list(ex.map(lambda j: render(j[1]), jobs))
    seen, docs = set(), []
    for (pkg, path), text in zip(jobs, rendered):
        rec = records[pkg]
        if text is None:
            rec["aliases"] = rec.get("aliases", 0) + 1
            continue
        d = page_docs(text, seen)
        rec["pages_kept"] = rec.get("pages_kept", 0) + (1 if d else 0)
        rec["documents"] = rec.get("documents", 0) + len(d)
        rec["bytes"] = rec.get("bytes", 0) + sum(len(x.encode("utf-8")) + 2 for x in d)
        docs += d
    body = ("\n\n".join(docs) + "\n").encode("utf-8")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "manpages.txt.gz")
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as g:
        g.write(body)
    with open(path, "wb") as f:
        f.write(buf.getvalue())
    used = {p: versions[p] for p in pkgs}
    meta = {
        "kind": "manpages",
        "source": "English manual pages of Debian main packages "
        + ", ".join(f"{p} {v}" for p, v in used.items())
        + " (rendered by groff, prose lines only; licences per package in `package_records`)",
        "packages": used,
        "package_records": records,
        "renderer": " ".join(GROFF) + f" (groff {subprocess.run(['groff', '--version'], capture_output=True, text=True).stdout.split(chr(10))[0]})",
        "documents": len(docs),
        "bytes": len(body),
        "gzip_bytes": len(buf.getvalue()),
        "format": "gzip of UTF-8 text; documents separated by one blank line; no blank lines inside a document",
        "sha256": hashlib.sha256(body).hexdigest(),
        "tool": "tools/demo/make_manpages.py",
    }
    with open(os.path.join(args.out, "manpages.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{path}: {len(docs)} documents, {len(body):,} bytes ({len(buf.getvalue()):,} gzipped), sha256 {meta['sha256']}")


if __name__ == "__main__":
    main()
