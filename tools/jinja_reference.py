#!/usr/bin/python3
"""Renders chat-template cases with Python's Jinja2, set up as transformers'
apply_chat_template sets it up: the reference tests/test_chat_real.c holds
octet's renderer to.

Usage (Debian's /usr/bin/python3 with python3-jinja2):

    /usr/bin/python3 tools/jinja_reference.py (--config TOKENIZER_CONFIG_JSON |
        --template FILE) [--tokens-from TOKENIZER_CONFIG_JSON] CASES_JSON OUT_JSON

--config takes the template and the special tokens from a tokenizer_config.json
(`chat_template`: a string, or a list whose "default" entry is used);
--template reads the template source from FILE (special tokens from
--tokens-from when given).  CASES_JSON is {"cases": [CASE, ...]}, a CASE being

    {"name": "...", "messages": [...], "add_generation_prompt": true,
     "extra": {"tools": [...], "enable_thinking": false, ...},
     "template": "optional source that replaces the model's template"}

OUT_JSON gets one entry per case, in order:
{"name": ..., "text": "rendered"} or, when rendering raised,
{"name": ..., "error": "message", "kind": "TemplateError" | "TypeError" | ...}.
"kind" is "TemplateError" for the template's own raise_exception(...).

The environment (as transformers/utils/chat_template_utils.py builds it):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
loopcontrols extension; filter tojson = json.dumps(x, ensure_ascii=False,
indent=..., separators=..., sort_keys=...); globals raise_exception (raises
TemplateError with the message) and strftime_now (datetime.now().strftime);
variables messages, tools (None), documents (None), add_generation_prompt,
the tokenizer's special tokens (as transformers' special_tokens_map: only
those set, additional_special_tokens as a list of strings, and the entries of
extra_special_tokens), then the case's extras, which win.
"""
import argparse
import json
import sys
from datetime import datetime

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    sys.exit("jinja_reference.py: jinja2 is missing: apt-get install python3-jinja2")

SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
           "mask_token")


def token_text(tok):
    """A special token as tokenizer_config.json writes it: a string or an
    AddedToken object {"content": ...}."""
    if isinstance(tok, dict):
        return tok.get("content")
    return tok


def special_tokens(config):
    out = {}
    for name in SPECIAL:
        text = token_text(config.get(name))
        if text:
            out[name] = text
    extra = config.get("additional_special_tokens")
    if extra:
        out["additional_special_tokens"] = [token_text(t) for t in extra]
    for name, tok in (config.get("extra_special_tokens") or {}).items():
        if token_text(tok):
            out[name] = token_text(tok)
    return out


def config_template(config):
    tpl = config.get("chat_template")
    if isinstance(tpl, list):
        tpl = next((t["template"] for t in tpl if t.get("name") == "default"), None)
    return tpl


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_case(env, template, tokens, case):
    variables = {"messages": case.get("messages", []), "tools": None, "documents": None,
                 "add_generation_prompt": case.get("add_generation_prompt", False)}
    variables.update(tokens)
    variables.update(case.get("extra") or {})
    name = case.get("name", "")
    try:
        src = case.get("template", template)
        if src is None:
            raise ValueError("no chat template")
        return {"name": name, "text": env.from_string(src).render(**variables)}
    except Exception as exc:  # every failure is a result the test compares
        kind = "TemplateError" if type(exc) is jinja2.exceptions.TemplateError else \
            type(exc).__name__
        return {"name": name, "error": str(exc), "kind": kind}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="tokenizer_config.json: template and special tokens")
    src.add_argument("--template", help="file holding the template source")
    ap.add_argument("--tokens-from", help="tokenizer_config.json for the special tokens")
    ap.add_argument("cases")
    ap.add_argument("out")
    args = ap.parse_args()
    template, config = None, {}
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            config = json.load(f)
        template = config_template(config)
    else:
        with open(args.template, encoding="utf-8") as f:
            template = f.read()
        if args.tokens_from:
            with open(args.tokens_from, encoding="utf-8") as f:
                config = json.load(f)
    with open(args.cases, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    env = make_env()
    tokens = special_tokens(config)
    results = [render_case(env, template, tokens, c) for c in cases]
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
