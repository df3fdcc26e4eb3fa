#!/usr/bin/env python3
"""Writes tests/fixtures/save_pretrained/: the JSON files transformers'
save_pretrained writes for the demo model when its tokenizer has no maximum
length -- tokenizer_config.json then carries model_max_length =
1000000000000000019884624838656 (transformers' VERY_LARGE_INTEGER, int(1e30)).

The model is models/demo loaded with AutoModelForCausalLM and saved again; the
tokenizer is models/demo's with model_max_length removed before loading, as a
tokenizer trained from scratch has none.  Only the small files are kept
(config.json, generation_config.json, tokenizer_config.json, tokenizer.json,
and special_tokens_map.json / chat_template.jinja where this transformers
writes them), except those identical to models/demo's; tests/test_cli.c
pairs them with models/demo's model.safetensors (save_pretrained writes the
same tensors) and the identical files.

Run where transformers is installed (the H200 machine, transformers 5.17):
    python3 tools/make_save_pretrained_fixture.py OUT_DIR
"""
import json
import os
import shutil
import sys
import tempfile

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

KEEP = ["config.json", "generation_config.json", "tokenizer_config.json", "tokenizer.json",
        "special_tokens_map.json", "chat_template.jinja"]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as td:
        src = os.path.join(td, "src")
        shutil.copytree("models/demo", src)
        cfg_path = os.path.join(src, "tokenizer_config.json")
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        cfg.pop("model_max_length", None)
        with open(cfg_path, "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=2)
        saved = os.path.join(td, "saved")
        tok = AutoTokenizer.from_pretrained(src)
        tok.save_pretrained(saved)
        model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16)
        model.save_pretrained(saved)
        ref = AutoModelForCausalLM.from_pretrained("models/demo", dtype=torch.bfloat16)
        same = all(torch.equal(a, b) for a, b in zip(ref.state_dict().values(),
                                                     model.state_dict().values()))
        print("transformers", transformers.__version__, "files:", sorted(os.listdir(saved)),
              "tensors equal to models/demo:", same)
        same_files = []
        for name in KEEP:
            p = os.path.join(saved, name)
            if not os.path.exists(p):
                continue
            demo = os.path.join("models/demo", name)
            if os.path.exists(demo) and open(p, "rb").read() == open(demo, "rb").read():
                same_files.append(name)  # the test takes models/demo's copy
            else:
                shutil.copy(p, out)
        with open(os.path.join(out, "README.md"), "w") as f:
            f.write("Written by tools/make_save_pretrained_fixture.py with transformers %s: "
                    "models/demo saved by save_pretrained, its tokenizer without a maximum "
                    "length.\nThe weights are models/demo/model.safetensors (tensors equal: "
                    "%s).\nWritten byte for byte as in models/demo, so not kept here: %s.\n"
                    % (transformers.__version__, same, ", ".join(same_files)))


if __name__ == "__main__":
    main()
