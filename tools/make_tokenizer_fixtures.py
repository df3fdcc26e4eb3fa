#!/usr/bin/env python3
"""Golden data for octet's tokenizer and chat templates.

Run where `tokenizers` (0.23) and `transformers` (5.x) are installed; nothing
is downloaded:

    python3 tools/make_tokenizer_fixtures.py OUT
    cp -r OUT/* tests/fixtures/

Writes:
  OUT/tokenizer/<name>/tokenizer.json, tokenizer_config.json
      five small BPE tokenizers TRAINED here on a generated corpus, with the
      exact normalizer / pre-tokenizer / decoder / post-processor settings of
      gpt2, llama3, qwen2, llama2 (legacy SentencePiece conversion) and
      mistral (Metaspace "first" conversion);
  OUT/tokenizer_golden.jsonl.gz
      one JSON object per line:
        {"text": T, "enc": {name: {"ids": [...], "dec": D, "dec_skip": S}}}
          ids = Tokenizer.from_file(...).encode(T).ids, D/S = decode(ids,
          skip_special_tokens=False/True)
        {"tok": name, "decode": [ids], "dec": D, "dec_skip": S}
          decoding of random id lists (partial UTF-8, byte fallback, ...)
  OUT/tokenizer_chat.jsonl.gz
      {"name": template, "template": src, "messages": [...], "extra": {...},
       "add_generation_prompt": bool, "rendered": R} or {..., "error": E}
      rendered by transformers' apply_chat_template(tokenize=False).
"""
import gzip
import json
import os
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

VOCAB_SIZE = 2000

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# --------------------------------------------------------------------- corpus
# Plain English written for this script, plus generated lines.
SENTENCES = """\
The quick brown fox jumps over the lazy dog.
It was a bright cold day in April, and the clocks were striking thirteen.
She sold sea shells by the sea shore, and nobody bought any of them.
We're going to need a bigger boat, said the captain with a nervous laugh.
I can't believe it's already half past eight; they'll be here soon.
The committee met on Tuesday to discuss the budget for next year.
After the storm, the river rose three feet and flooded the lower fields.
He didn't know whether to laugh or cry when he saw the broken vase.
Please remember to bring your passport, your tickets, and a warm jacket.
In 1969, astronauts walked on the Moon for the first time.
The recipe calls for 2 cups of flour, 3 eggs, and 250 ml of milk.
Our train leaves at 07:45 from platform 9 and arrives at 11:30.
You've got mail! Check your inbox for the latest updates.
Why does the library close so early on Sundays?
Most cats sleep between twelve and sixteen hours a day.
The old lighthouse keeper climbed the stairs every night at dusk.
They'd rather walk than wait for the bus in the rain.
Mathematics is the language in which the laws of nature are written.
A journey of a thousand miles begins with a single step.
The museum's new exhibit features paintings from the early 1900s.
Don't count your chickens before they hatch.
The price rose from $19.99 to $24.50 in just two weeks.
Temperatures dropped to -15 degrees overnight, freezing the pond solid.
Can you hear the music drifting from the house across the street?
Every morning the baker opened his shop at five o'clock sharp.
The spacecraft traveled 140 million kilometers before reaching Mars.
Children played in the park while their parents chatted on the benches.
The password must contain at least 8 characters, including a digit.
He whispered, "I'll be back before the snow melts."
Wait... what did you just say?!
The results were clear: 87% of participants preferred the new design.
Her grandmother's garden was full of roses, tulips and daffodils.
The meeting has been moved to room 204 on the second floor.
It's not the size of the dog in the fight, it's the size of the fight in the dog.
Email me at someone@example.com or call 555-0123 after 6 pm.
The bridge, completed in 1937, spans nearly two kilometers.
Rain, rain, go away; come again another day.
If you're reading this, the experiment worked.
The CPU temperature reached 92C under full load.
Knowledge speaks, but wisdom listens.
""".splitlines()

SUBJECTS = ["The farmer", "A young student", "My neighbor", "The engineer", "Our teacher",
            "The old man", "A small bird", "The scientist", "Everyone", "Nobody", "The city",
            "The company", "The orchestra", "Your friend", "The river", "I", "We", "They",
            "She", "He", "The robot", "The committee", "A stranger", "The children"]
VERBS = ["built", "found", "painted", "wrote", "carried", "opened", "watched", "repaired",
         "forgot", "discovered", "measured", "sold", "bought", "described", "cleaned",
         "explained", "followed", "ignored", "borrowed", "designed", "counted", "remembered"]
OBJECTS = ["a wooden bridge", "the blue door", "three letters", "an ancient map",
           "the broken clock", "a long story", "the empty box", "twelve apples",
           "the new machine", "a strange noise", "the last train", "the quiet garden",
           "a heavy suitcase", "the morning paper", "a silver key", "the winter coat"]
TAILS = ["yesterday.", "last week.", "in the rain.", "before dawn.", "without a word.",
         "with great care.", "for the third time.", "near the station.", "at noon.",
         "because it was late.", "and then went home.", "while singing.", "again!",
         "on 12 March 2021.", "in under 5 minutes.", "— or so they say.", "(really)."]
CONTRACTIONS = ["I'm", "you're", "it's", "we've", "they'll", "he'd", "I'M", "YOU'RE",
                "It'S", "she'LL", "don't", "can't", "won't", "o'clock", "rock'n'roll"]
UNICODE_BITS = ["café", "naïve", "Ångström", "façade", "jalapeño", "Straße", "Ελληνικά",
                "русский язык", "日本語のテキスト", "中文分词测试", "한국어 문장", "עברית",
                "العربية", "हिन्दी", "ไทย", "Tiếng Việt", "emoji 😀😃😄", "👍🏽", "👨‍👩‍👧‍👦",
                "🇫🇷🇯🇵", "∑∫√∞≈≠", "→←↑↓", "°C", "½ ¼ ¾", "①②③", "ﬁﬂ", "™©®",
                "e\u0301", "a\u0308", "\u1100\u1161\u11a8", "Ａｂｃ１２３", "\u00a0nbsp",
                "zero\u200bwidth", "\u2028sep", "tab\tsep", "ſ", "İstanbul", "ΣΊΣΥΦΟΣ"]
CODE_LINES = [
    "def add(a, b):\n    return a + b",
    "for (int i = 0; i < n; i++) { sum += x[i]; }",
    "if (x != NULL && x->next) return -1;",
    "const result = await fetch(`/api/v1/items?id=${id}`);",
    "SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY name;",
    "    indented    with    spaces",
    "x = [1, 2, 3]  # comment\n\n\ny = {'a': 1}",
    "<div class=\"main\">Hello &amp; welcome</div>",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); }",
    "fn main() { let v: Vec<u32> = (0..10).collect(); }",
    "print(f\"{value:>10.3f}\")",
    "$ git commit -m 'fix: handle empty input'",
    "a==b||c!=d&&e<=f>=g",
    "path/to/some_file.txt:123:45: error: expected ';'",
    "{\"key\": [true, false, null], \"n\": -1.5e10}",
]
SPECIAL_BITS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>",
                "</s>", "<unk>", "[INST]", "[/INST]", "<mask>", "<think>", "</think>",
                "<tool_call>", "wordtok", "cafe\u0301", "café", "<|im_start", "<<s>>", "< s >"]
WHITESPACE_BITS = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t \t", "     \n",
                   "\u3000", "\u00a0"]


def gen_line(rng):
    kind = rng.randrange(12)
    if kind <= 2:
        s = "%s %s %s %s" % (rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS),
                             rng.choice(TAILS))
        if rng.random() < 0.3:
            s = s.upper() if rng.random() < 0.5 else s.lower()
        return s
    if kind == 3:
        return rng.choice(SENTENCES)
    if kind == 4:
        return " ".join(rng.choice(CONTRACTIONS + OBJECTS) for _ in range(rng.randint(1, 6)))
    if kind == 5:
        parts = [rng.choice(UNICODE_BITS) for _ in range(rng.randint(1, 4))]
        return rng.choice(WHITESPACE_BITS).join(parts)
    if kind == 6:
        return rng.choice(CODE_LINES)
    if kind == 7:
        n = rng.choice([7, 42, 123, 2024, 31415926, 1000000007, 12345678901234567890])
        return rng.choice(["%d" % n, "v%d.%d.%d" % (n % 10, n % 7, n % 13), "%d,%03d" %
                           (n // 1000, n % 1000), "x%d y%d" % (n, n * 3), "%.3f" % (n / 7),
                           "0x%x" % n, "%d%%" % (n % 100), "+1 (%d) %d" % (n % 999, n)])
    if kind == 8:
        words = [rng.choice(SUBJECTS + OBJECTS + UNICODE_BITS + CONTRACTIONS)
                 for _ in range(rng.randint(1, 5))]
        out = ""
        for w in words:
            out += w + rng.choice(WHITESPACE_BITS)
        return out
    if kind == 9:
        a = rng.choice(SPECIAL_BITS)
        b = rng.choice(SPECIAL_BITS)
        return rng.choice([a + rng.choice(SENTENCES) + b,
                           "text " + a + " more" + rng.choice(WHITESPACE_BITS) + b,
                           a + a + rng.choice(UNICODE_BITS), " " + a + " ",
                           rng.choice(OBJECTS) + a])
    if kind == 10:
        ws = rng.choice(WHITESPACE_BITS) * rng.randint(1, 8)
        return rng.choice([ws, ws + "x", "x" + ws, "a" + ws + "b" + ws, ws + "!" + ws])
    # random printable mix
    alphabet = "abcXYZ019 .,;:!?'\"-_()[]{}<>/\\@#$%^&*+=~`|\t\né中😀ß"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))


def corpus_lines(seed, n):
    rng = random.Random(seed)
    lines = list(SENTENCES) + list(CODE_LINES)
    while len(lines) < n:
        lines.append(gen_line(rng))
    return lines


# ----------------------------------------------------------------- tokenizers

def train(tok, lines, special=(), limit_alphabet=None, initial_alphabet=()):
    kw = dict(vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=list(special),
              initial_alphabet=list(initial_alphabet), show_progress=False)
    if limit_alphabet:
        kw["limit_alphabet"] = limit_alphabet
    tok.train_from_iterator(lines, trainer=trainers.BpeTrainer(**kw))
    return tok


def add_specials(tok, names):
    tok.add_special_tokens([AddedToken(n, special=True, normalized=False) for n in names])


def with_model_options(tok, **options):
    """Sets BPE model options in the JSON (a trainer may reset them)."""
    d = json.loads(tok.to_str())
    d["model"].update(options)
    return Tokenizer.from_str(json.dumps(d))


def byte_level_base(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    return train(tok, lines, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())


def make_gpt2(lines):
    tok = byte_level_base(lines)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    add_specials(tok, ["<|endoftext|>"])
    tok.add_special_tokens([AddedToken("<mask>", special=True, normalized=False, lstrip=True)])
    tok.add_tokens([AddedToken("wordtok", special=False, normalized=False, single_word=True)])
    return tok, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                 "add_bos_token": False}


def make_llama3(lines):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    train(tok, lines, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok = with_model_options(tok, ignore_merges=True)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|python_tag|>",
                "<|eom_id|>"]
    add_specials(tok, specials)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
            special_tokens=[("<|begin_of_text|>", bos)])])
    return tok, {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                 "chat_template": TEMPLATES["llama3.1"]}


def make_qwen2(lines):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    train(tok, lines, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    add_specials(tok, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t in ["<think>", "</think>", "<tool_call>", "</tool_call>"]])
    tok.add_tokens([AddedToken("café", special=False, normalized=True)])
    return tok, {"bos_token": None, "eos_token": "<|im_end|>",
                 "chat_template": TEMPLATES["qwen2.5"]}


def sentencepiece_like(lines, extra_specials=()):
    """Trains with a Metaspace splitter (merges stay inside words, as with
    SentencePiece) and returns the JSON dict with <unk> <s> </s> and the 256
    <0xNN> byte tokens placed first, like Llama-2's vocabulary."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always",
                                                 split=True)
    train(tok, lines, limit_alphabet=150)
    d = json.loads(tok.to_str())
    trained = sorted(d["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = 3 + b
    for t, _ in trained:
        if t not in vocab:
            vocab[t] = len(vocab)
    d["model"]["vocab"] = vocab
    d["model"]["unk_token"] = "<unk>"
    d["model"]["fuse_unk"] = True
    d["model"]["byte_fallback"] = True
    d["model"]["ignore_merges"] = False
    added = []
    for i, t in enumerate(["<unk>", "<s>", "</s>"]):
        added.append({"id": i, "content": t, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
    for t in extra_specials:
        if t not in vocab:
            vocab[t] = len(vocab)
        added.append({"id": vocab[t], "content": t, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
    d["added_tokens"] = added
    d["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    return d


SP_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}


def make_llama2(lines):
    d = sentencepiece_like(lines)
    d["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
    d["pre_tokenizer"] = None
    d["decoder"] = SP_DECODER
    return Tokenizer.from_str(json.dumps(d)), {
        "bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True, "add_eos_token": False,
        "chat_template": TEMPLATES["mistral-v0.1"]}


def make_mistral(lines):
    d = sentencepiece_like(lines, extra_specials=["[INST]", "[/INST]"])
    d["normalizer"] = None
    d["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581",
                          "prepend_scheme": "first", "split": False}
    d["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
         "split": False},
        {"type": "ByteFallback"}, {"type": "Fuse"}]}
    return Tokenizer.from_str(json.dumps(d)), {
        "bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True, "add_eos_token": False,
        "chat_template": TEMPLATES["mistral-v0.3"]}


# ------------------------------------------------------------ chat templates
# Public chat templates as published in each model's tokenizer_config.json.

TEMPLATES = {}

TEMPLATES["llama3"] = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

TEMPLATES["llama3.1"] = r'''{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
'''

TEMPLATES["mistral-v0.1"] = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
    "roles are supported!') }}{% endif %}{% endfor %}")

TEMPLATES["mistral-v0.3"] = r'''{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
'''

TEMPLATES["qwen2"] = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

TEMPLATES["qwen2.5"] = r'''{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
'''

TEMPLATES["qwen3"] = r'''{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}'''

TEMPLATES["granite"] = r'''{%- if tools %}
    {{- '<|start_of_role|>available_tools<|end_of_role|>
' }}
    {%- for tool in tools %}
    {{- tool | tojson(indent=4) }}
    {%- if not loop.last %}
        {{- '

' }}
    {%- endif %}
    {%- endfor %}
    {{- '<|end_of_text|>
' }}
{%- endif %}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
    {{- '<|start_of_role|>system<|end_of_role|>' + message['content'] + '<|end_of_text|>
' }}
    {%- elif message['role'] == 'user' %}
    {{- '<|start_of_role|>user<|end_of_role|>' + message['content'] + '<|end_of_text|>
' }}
    {%- elif message['role'] == 'assistant' %}
    {{- '<|start_of_role|>assistant<|end_of_role|>'  + message['content'] + '<|end_of_text|>
' }}
    {%- elif message['role'] == 'assistant_tool_call' %}
    {{- '<|start_of_role|>assistant<|end_of_role|><|tool_call|>' + message['content'] + '<|end_of_text|>
' }}
    {%- elif message['role'] == 'tool_response' %}
    {{- '<|start_of_role|>tool_response<|end_of_role|>' + message['content'] + '<|end_of_text|>
' }}
    {%- endif %}
    {%- if loop.last and add_generation_prompt %}
    {{- '<|start_of_role|>assistant<|end_of_role|>' }}
    {%- endif %}
{%- endfor %}'''

TEMPLATES["chatml"] = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}")

TEMPLATE_TOKENS = {
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.1": ("<|begin_of_text|>", "<|eot_id|>"),
    "mistral-v0.1": ("<s>", "</s>"),
    "mistral-v0.3": ("<s>", "</s>"),
    "qwen2": (None, "<|im_end|>"),
    "qwen2.5": (None, "<|im_end|>"),
    "qwen3": (None, "<|im_end|>"),
    "granite": ("<|end_of_text|>", "<|end_of_text|>"),
    "chatml": ("<s>", "</s>"),
}

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}

CONVERSATIONS = [
    ("hello", [{"role": "user", "content": "Hello!"}], {}),
    ("system", [{"role": "system", "content": "You are a terse assistant."},
                {"role": "user", "content": "What is 2+2?"}], {}),
    ("multi", [{"role": "system", "content": "Be kind."},
               {"role": "user", "content": "Hi there"},
               {"role": "assistant", "content": "Hello! How can I help?"},
               {"role": "user", "content": "Tell me a joke about cats."}], {}),
    ("alternating", [{"role": "user", "content": "one"},
                     {"role": "assistant", "content": "two"},
                     {"role": "user", "content": "three"},
                     {"role": "assistant", "content": "four"}], {}),
    ("unicode", [{"role": "user", "content": "  Héllo 👋 世界\n\n  tabs\there  "}], {}),
    ("not_alternating", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
     {}),
    ("thinking", [{"role": "user", "content": "Why is the sky blue?"},
                  {"role": "assistant",
                   "content": "<think>\nRayleigh scattering.\n</think>\n\nBecause of "
                              "Rayleigh scattering."},
                  {"role": "user", "content": "Thanks!"}], {}),
    ("no_thinking", [{"role": "user", "content": "Quick answer please."}],
     {"enable_thinking": False}),
    ("tools", [{"role": "system", "content": "You can call tools."},
               {"role": "user", "content": "Weather in Paris?"},
               {"role": "assistant", "content": "",
                "tool_calls": [{"type": "function", "function": {
                    "name": "get_weather", "arguments": {"city": "Paris"}}}]},
               {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}"}],
     {"tools": [WEATHER_TOOL]}),
    ("tools_only", [{"role": "user", "content": "What's the weather in Oslo?"}],
     {"tools": [WEATHER_TOOL]}),
    ("date", [{"role": "user", "content": "What day is it?"}],
     {"date_string": "01 Jan 2025"}),
]


def load_chat_backend(tok):
    try:
        from transformers import PreTrainedTokenizerFast as Fast
    except ImportError:  # transformers 5 renamed the class
        from transformers import TokenizersBackend as Fast
    return Fast(tokenizer_object=tok)


def render_all(base_tok):
    records = []
    for name, src in TEMPLATES.items():
        bos, eos = TEMPLATE_TOKENS[name]
        for conv_name, messages, extra in CONVERSATIONS:
            for agp in (False, True):
                hf = load_chat_backend(base_tok)
                kw = dict(extra)
                if bos is not None:
                    kw["bos_token"] = bos
                kw["eos_token"] = eos
                rec = {"name": name, "conversation": conv_name, "template": src,
                       "messages": messages, "extra": kw, "add_generation_prompt": agp}
                try:
                    r = hf.apply_chat_template(
                        messages, chat_template=src, tokenize=False,
                        add_generation_prompt=agp, **kw)
                    if not isinstance(r, str):
                        raise SystemExit("apply_chat_template returned %r" % type(r))
                    rec["rendered"] = r
                except Exception as e:  # raise_exception and template errors
                    rec["error"] = "%s: %s" % (type(e).__name__, e)
                records.append(rec)
    return records


# ----------------------------------------------------------------------- main

def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_tokenizer_fixtures.py OUT_DIR")
    out = sys.argv[1]
    train_lines = corpus_lines(1, 6000)
    test_lines = corpus_lines(2, 2400)[len(SENTENCES) + len(CODE_LINES):]
    test_lines = list(SENTENCES) + list(CODE_LINES) + test_lines
    builders = {"gpt2": make_gpt2, "llama3": make_llama3, "qwen2": make_qwen2,
                "llama2": make_llama2, "mistral": make_mistral}
    toks = {}
    for name, make in builders.items():
        tok, cfg = make(train_lines)
        d = os.path.join(out, "tokenizer", name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(tok.to_str())
        # reload from the file so the goldens come from exactly what we ship
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        cfg = {k: v for k, v in cfg.items()}
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, ensure_ascii=False, indent=1)
        toks[name] = tok
    rng = random.Random(3)
    with gzip.open(os.path.join(out, "tokenizer_golden.jsonl.gz"), "wt", encoding="utf-8",
                   compresslevel=9) as f:
        for text in test_lines:
            enc = {}
            for name, tok in toks.items():
                ids = tok.encode(text).ids
                enc[name] = {"ids": ids, "dec": tok.decode(ids, skip_special_tokens=False),
                             "dec_skip": tok.decode(ids, skip_special_tokens=True)}
            f.write(json.dumps({"text": text, "enc": enc}, ensure_ascii=False) + "\n")
        for name, tok in toks.items():
            n = tok.get_vocab_size(with_added_tokens=True)
            for _ in range(150):
                ids = [rng.randrange(n) for _ in range(rng.randint(1, 12))]
                f.write(json.dumps({"tok": name, "decode": ids,
                                    "dec": tok.decode(ids, skip_special_tokens=False),
                                    "dec_skip": tok.decode(ids, skip_special_tokens=True)},
                                   ensure_ascii=False) + "\n")
    # gzip embeds no name/time with GzipFile(mtime=0): rewrite deterministically
    for fn in ["tokenizer_golden.jsonl.gz"]:
        p = os.path.join(out, fn)
        with gzip.open(p, "rb") as f:
            data = f.read()
        with open(p, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0,
                               filename="") as g:
                g.write(data)
    records = render_all(toks["llama3"])
    p = os.path.join(out, "tokenizer_chat.jsonl.gz")
    with open(p, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0, filename="") as g:
            for r in records:
                g.write((json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8"))
    n_err = sum(1 for r in records if "error" in r)
    print("wrote %d texts x %d tokenizers, %d chat renderings (%d errors) to %s"
          % (len(test_lines), len(toks), len(records), n_err, out))


if __name__ == "__main__":
    main()
