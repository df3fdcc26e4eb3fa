// The reference side of tests/test_tokenizer_real.c: Hugging Face's Rust
// `tokenizers` library (its Node binding) encodes and decodes every text of
// a JSON-lines corpus with one tokenizer.json.
// Usage: node reference.mjs TOKENIZER_JSON CORPUS_JSONL OUT_JSONL
// Each output line: {"special": ids, "plain": ids, "decoded": text,
// "decoded_skip": text} -- ids with and without special tokens, and the
// decode of the "special" ids without and with skip_special_tokens.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');

const [tokPath, corpusPath, outPath] = process.argv.slice(2);
const tok = Tokenizer.fromFile(tokPath);
const texts = readFileSync(corpusPath, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));
const out = [];
for (const t of texts) {
  const special = (await tok.encode(t, null, { addSpecialTokens: true })).getIds();
  const plain = (await tok.encode(t, null, { addSpecialTokens: false })).getIds();
  const decoded = await tok.decode(special, false);
  const decodedSkip = await tok.decode(special, true);
  out.push(JSON.stringify({ special, plain, decoded, decoded_skip: decodedSkip }));
}
writeFileSync(outPath, out.join('\n') + '\n');
