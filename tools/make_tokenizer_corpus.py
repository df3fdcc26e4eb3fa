#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer_corpus.jsonl: the input texts of the
real-tokenizer suite (tests/test_tokenizer_real.c), one JSON string per line.

These are inputs, not expected outputs: the expected ids come from Hugging
Face's Rust `tokenizers` library at test time (tests/tokenizers/reference.mjs).
The texts are deterministic (seeded) mixtures of: English prose (the demo
model's held-out text, public domain), digit runs, code and whitespace runs,
CJK, Arabic, Devanagari, Cyrillic, Greek, Hangul, emoji with ZWJ sequences,
skin tones and flags, NFD-decomposed text, literal special-token strings of
the tested tokenizers, control characters, multi-line texts, and characters
assigned in Unicode 15, 15.1 and 16 (which older Unicode tables class
differently).  Python's unicodedata is not consulted: code points are
written out, so the script's output does not depend on its Python.

Usage: python3 tools/make_tokenizer_corpus.py > tests/fixtures/tokenizer_corpus.jsonl
"""
import json
import random
import sys

PROSE = "models/demo/eval.txt"

SPECIALS = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
    "<|end_header_id|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>",
    "</think>", "<s>", "</s>", "<unk>", "[INST]", "[/INST]", "<bos>", "<eos>",
    "<start_of_turn>", "<end_of_turn>", "<pad>", "<|startoftext|>", "<|return|>",
    "<|channel|>", "<|message|>", "<|start|>", "<|end|>",
    "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>",
    "<\uff5cUser\uff5c>", "<\uff5cAssistant\uff5c>", "<|reserved_special_token_5|>",
]

CODE = [
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}",
    "if __name__ == '__main__':\n        main()\n\n\n",
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name DESC;",
    "const x = {a: 1, 'b': [2, 3], \"c\": null}; // comment",
    "    \t  \t\t   trailing spaces and tabs   \t",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); }",
    "x=1;y=2;z=x+y*3-4/5%6^7&8|9",
    "   leading spaces",
    "\n\n\nthree newlines first",
    "a\r\nb\r\nc\r\n",
    "path/to/file.txt C:\\Windows\\System32 https://example.com/a?b=c&d=e#f",
    "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
    "It's they're we've I'm you'll she'd IT'S THEY'RE WE'VE I'M YOU'LL SHE'D",
    "don't   won't    can't",
]

SCRIPTS = [
    "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\u3002",
    "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a",
    "\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc744 \ud1a0\ud070\ud654\ud569\ub2c8\ub2e4.",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645\u060c \u0647\u0630\u0627 \u0646\u0635 \u0639\u0631\u0628\u064a\u064c \u0645\u064f\u0634\u064e\u0643\u0651\u064e\u0644.",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e, \u092f\u0939 \u0939\u093f\u0928\u094d\u0926\u0940 \u0915\u093e \u0935\u093e\u0915\u094d\u092f \u0939\u0948\u0964 \u0967\u0968\u0969",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u042d\u0442\u043e \u0442\u0435\u0441\u0442.",
    "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5, \u03a3\u03a9\u039a\u03a1\u0391\u03a4\u0397\u03a3.",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22",
    "Ti\u1ebfng Vi\u1ec7t c\u00f3 d\u1ea5u: \u0111\u01b0\u1eddng ph\u1ed1",
    "\u00c5ngstr\u00f6m caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00df \u0130stanbul \ufb01ne \u2460 \u00bd \u2126",
    "\u00d7\u00f7\u00b1\u2211\u222b\u221e\u2248\u2260\u2264\u2265 \u20ac100 \u00a350 \u00a5300 \u20b9",
    "\u300c\u5f15\u7528\u300d\u3010\u62ec\u5f27\u3011\u2026\u2014\u2013\u2018\u2019\u201c\u201d",
]

EMOJI = [
    "\U0001F600\U0001F603\U0001F604 smile",
    "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466 family",
    "\U0001F3F3\uFE0F\u200D\U0001F308 rainbow flag",
    "\U0001F1FA\U0001F1F8\U0001F1EF\U0001F1F5\U0001F1E9\U0001F1EA flags",
    "\U0001F44D\U0001F3FD\U0001F44B\U0001F3FF skin tones",
    "\U0001F9D1\u200D\U0001F4BB\U0001F469\u200D\U0001F52C professions",
    "\u2764\uFE0F\u2728\u2B50\u26A1 symbols",
    "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F tag sequence",
]

# Assigned in Unicode 15.0, 15.1 and 16.0.
NEW_UNICODE = [
    "\U0001FAF8\U0001FAF7\U0001FAE8\U0001FACE\U0001FA75",          # 15.0 emoji
    "\U00011F04\U00011F05\U00011F06\U00011F12 \U00011F50\U00011F51",  # Kawi letters, digits
    "\U0001E4D0\U0001E4D1\U0001E4D2 \U0001E4F0\U0001E4F1\U0001E4F2",  # Nag Mundari
    "\U0002EBF0\U0002EBF1\U0002EBF2",                                # CJK Ext I (15.1)
    "\U00010D50\U00010D51\U00010D70\U00010D71 \U00010D40\U00010D41",  # Garay (16.0)
    "\U0001E5D0\U0001E5D1\U0001E5D2 \U0001E5F1\U0001E5F2",            # Ol Onal (16.0)
    "\U00011380\U00011381\U00011383\U00011390",                      # Tulu-Tigalari (16.0)
    "\U00011BC0\U00011BC1\U00011BC2 \U00011BF0\U00011BF1",            # Sunuwar (16.0)
    "\U00016D40\U00016D43\U00016D50 \U00016D70\U00016D71",            # Kirat Rai (16.0)
    "\U0001CCF0\U0001CCF1\U0001CCF2",                                # outlined digits (16.0)
    "\U0001FAE9\U0001FAC6\U0001FABE\U0001FADC",                      # 16.0 emoji
    "\u1C89\u1C8A",                                                  # Cyrillic TJE (16.0)
]

CONTROL = [
    "tab\tnul-free\x01\x02\x03\x1b[31mred\x1b[0m\x7f",
    "form\x0cfeed vertical\x0btab",
    "bell\x07 backspace\x08 unit\x1f sep",
    "\u200b\u200c\u200d\u2060 zero widths \ufeff bom",
    "\u00a0nbsp\u2002en\u2003em\u3000ideographic\u2028line\u2029para",
    "\u0085next line",
]

DIGITS = [
    "1", "12", "123", "1234", "12345", "1234567890123",
    "3.14159 2.71828 6.02e23 -1e-9 +42",
    "Call 555-123-4567 or +1 (800) 555 0199 before 2024-06-30T12:34:56Z",
    "\u0661\u0662\u0663 \u0967\u0968\u0969 \uff11\uff12\uff13 \u2460\u2461 \u00b2\u00b3",
    "v1.2.3-rc4 0x1F 0b1010 1_000_000",
]


def nfd(s):
    # A few precomposed letters and their canonical decompositions.
    table = {"\u00e9": "e\u0301", "\u00e8": "e\u0300", "\u00f1": "n\u0303",
             "\u00fc": "u\u0308", "\u00c5": "A\u030a", "\u1ec7": "e\u0323\u0302",
             "\u00e7": "c\u0327", "\u01d6": "u\u0308\u0304"}
    return "".join(table.get(c, c) for c in s)


def main():
    rng = random.Random(20261201)
    prose = [l.rstrip("\n") for l in open(PROSE, encoding="utf-8") if l.strip()]
    texts = []
    texts += prose[:80]
    texts += CODE + SCRIPTS + EMOJI + NEW_UNICODE + CONTROL + DIGITS
    texts += [nfd(s) for s in ["caf\u00e9 cr\u00e8me br\u00fbl\u00e9e", "ma\u00f1ana ni\u00f1o",
                                "\u00fcber M\u00fcller \u00c5sa", "Vi\u1ec7t Nam \u00e7a",
                                "\u01d6 pinyin l\u01d6"]]
    texts += ["%s hello %s" % (a, b) for a, b in zip(SPECIALS, SPECIALS[1:] + SPECIALS[:1])]
    texts += [s + s for s in SPECIALS[:8]]
    texts += [" " * n + "x" + " " * n for n in (1, 2, 3, 7, 16)]
    texts += ["\n" * n + "y" for n in (1, 2, 5)] + ["", " ", "  ", "\n", "\t\n \n"]
    texts += ["a" * 200, "ab" * 150, "\u4e00" * 90, "9" * 100, "!?" * 60]
    pools = [prose, CODE, SCRIPTS, EMOJI, NEW_UNICODE, CONTROL, DIGITS, SPECIALS]
    for _ in range(170):
        k = rng.randint(2, 5)
        parts = [rng.choice(rng.choice(pools)) for _ in range(k)]
        seps = [rng.choice([" ", "", "\n", "  ", "\t", "\n\n", ", "]) for _ in range(k - 1)]
        s = parts[0]
        for sep, p in zip(seps, parts[1:]):
            s += sep + p
        texts.append(s)
    for _ in range(20):  # multi-line
        texts.append("\n".join(rng.choice(prose) for _ in range(rng.randint(2, 6))))
    w = sys.stdout.write
    for t in texts:
        w(json.dumps(t, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main()
