#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer_add_special.json: what transformers'
AutoTokenizer does with add_bos_token / add_eos_token in tokenizer_config.json,
for each real tokenizer of tests/tokenizers/ (as published, and with the two
flags forced on or off).

For every tokenizer folder and variant the record holds the tokenizer class
transformers chose, and for a few texts the ids of tok(text) with
add_special_tokens True and False.  tests/test_tokenizer_real.c loads the same
files with the same overrides into octet and requires the same ids.

Run where transformers is installed (the H200 machine: transformers 5.17),
with the folders tools/real_tokenizers.sh makes (build/npm/real_tokenizers/
models), e.g.:
    python3 tools/make_add_special_fixtures.py MODELS_DIR tests/fixtures/tokenizer_add_special.json
"""
import json
import os
import shutil
import sys
import tempfile

import transformers
from transformers import AutoTokenizer

TEXTS = ["Hello world", "", " leading space", "two\nlines", "<s> and </s>"]
VARIANTS = [
    ("published", {}),
    ("bos_on", {"add_bos_token": True}),
    ("bos_off", {"add_bos_token": False}),
    ("eos_on", {"add_eos_token": True}),
    ("both_on", {"add_bos_token": True, "add_eos_token": True}),
]


def one(src, tmp, overrides):
    os.makedirs(tmp, exist_ok=True)
    shutil.copy(os.path.join(src, "tokenizer.json"), tmp)
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg.update(overrides)
    with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
    tok = AutoTokenizer.from_pretrained(tmp)
    cases = []
    for t in TEXTS:
        cases.append({
            "text": t,
            "special": tok(t, add_special_tokens=True)["input_ids"],
            "plain": tok(t, add_special_tokens=False)["input_ids"],
        })
    return {"class": type(tok).__name__, "cases": cases}


def main():
    models, out = sys.argv[1], sys.argv[2]
    recs = []
    with tempfile.TemporaryDirectory() as td:
        for name in sorted(os.listdir(models)):
            for vname, over in VARIANTS:
                rec = {"tokenizer": name, "variant": vname, "overrides": over}
                try:
                    rec.update(one(os.path.join(models, name), os.path.join(td, name + vname), over))
                except Exception as e:  # recorded: octet must then fail as well
                    rec["error"] = "%s: %s" % (type(e).__name__, e)
                recs.append(rec)
                print(name, vname, rec.get("class"), rec.get("error", ""), flush=True)
    doc = {"transformers": transformers.__version__, "records": recs}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
