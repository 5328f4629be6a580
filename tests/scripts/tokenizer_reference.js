#!/usr/bin/env node
// Hugging Face's own tokenizer (npm package `tokenizers`, the official Node binding)
// as the reference for our C++ tokenizer.
//
//   node tokenizer_reference.js encode  NPM_DIR TOKENIZER_JSON CORPUS.jsonl OUT_IDS.jsonl
//        -> one JSON id array per corpus line (no special tokens added: the
//           DeepSeek post-processor adds none, and BOS is our config's business)
//   node tokenizer_reference.js decode  NPM_DIR TOKENIZER_JSON IDS.jsonl OUT_TEXT.jsonl [--skip-special]
//   node tokenizer_reference.js derive-v4 V3_TOKENIZER_JSON OUT_JSON
//        -> DeepSeek-V3's tokenizer.json plus the added tokens V4's chat format uses
//   node tokenizer_reference.js bench   NPM_DIR TOKENIZER_JSON CORPUS.jsonl
//        -> single-threaded encode throughput, one JSON line
'use strict';

const fs = require('fs');
const path = require('path');

function loadTokenizers(npmDir) {
  return require(path.join(path.resolve(npmDir), 'node_modules', 'tokenizers'));
}
function readJsonl(file) {
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));
}

async function encode(npmDir, tokenizerJson, corpusFile, outFile) {
  const { Tokenizer } = loadTokenizers(npmDir);
  const tokenizer = Tokenizer.fromFile(tokenizerJson);
  const out = [];
  for (const text of readJsonl(corpusFile)) {
    const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
    out.push(JSON.stringify(encoding.getIds()));
  }
  fs.writeFileSync(outFile, out.join('\n') + '\n');
}

async function decode(npmDir, tokenizerJson, idsFile, outFile, skipSpecial) {
  const { Tokenizer } = loadTokenizers(npmDir);
  const tokenizer = Tokenizer.fromFile(tokenizerJson);
  const out = [];
  for (const ids of readJsonl(idsFile)) out.push(JSON.stringify(await tokenizer.decode(ids, skipSpecial)));
  fs.writeFileSync(outFile, out.join('\n') + '\n');
}

// V4 keeps V3's vocabulary and adds chat-format tokens. Their exact ids in V4's file
// do not matter for conformance; what matters is that added tokens of both kinds
// (special or not, normalized or not) are matched inside text the same way.
function deriveV4(v3File, outFile) {
  const spec = JSON.parse(fs.readFileSync(v3File, 'utf8'));
  let nextId = Math.max(...spec.added_tokens.map((t) => t.id)) + 1;
  const add = (content, special) => spec.added_tokens.push({
    id: nextId++, content, single_word: false, lstrip: false, rstrip: false, normalized: !special, special,
  });
  for (const t of ['<think>', '</think>', '｜DSML｜']) add(t, false);
  for (const t of ['<｜latest_reminder｜>', '<｜action｜>', '<｜query｜>', '<｜authority｜>', '<｜domain｜>', '<｜title｜>',
    '<｜read_url｜>', '<｜extracted_url｜>']) add(t, true);
  fs.writeFileSync(outFile, JSON.stringify(spec));
}

async function bench(npmDir, tokenizerJson, corpusFile) {
  const { Tokenizer } = loadTokenizers(npmDir);
  const tokenizer = Tokenizer.fromFile(tokenizerJson);
  const corpus = readJsonl(corpusFile);
  const bytes = corpus.reduce((sum, s) => sum + Buffer.byteLength(s, 'utf8'), 0);
  // Whole corpus in ~64 KB chunks too, so that per-call overhead of the binding
  // (promise, string conversion) does not dominate.
  const chunks = [];
  let current = '', currentBytes = 0;
  for (const s of corpus) {
    current += s + '\n';
    currentBytes += Buffer.byteLength(s, 'utf8') + 1;
    if (currentBytes >= 65536) { chunks.push(current); current = ''; currentBytes = 0; }
  }
  if (current) chunks.push(current);
  const chunkBytes = chunks.reduce((sum, s) => sum + Buffer.byteLength(s, 'utf8'), 0);

  const timeIt = async (texts) => {
    let tokens = 0;
    const start = process.hrtime.bigint();
    for (const t of texts) tokens += (await tokenizer.encode(t, null, { addSpecialTokens: false })).getLength();
    return { seconds: Number(process.hrtime.bigint() - start) / 1e9, tokens };
  };
  await timeIt(corpus);  // warm-up (BPE cache, JIT)
  const best = async (texts) => {
    let result = null;
    for (let i = 0; i < 3; i++) {
      const r = await timeIt(texts);
      if (!result || r.seconds < result.seconds) result = r;
    }
    return result;
  };
  const perString = await best(corpus);
  const chunked = await best(chunks);
  console.log(JSON.stringify({
    strings: corpus.length, bytes, per_string_mb_s: bytes / perString.seconds / 1e6, per_string_tokens: perString.tokens,
    chunks: chunks.length, chunk_bytes: chunkBytes, chunked_mb_s: chunkBytes / chunked.seconds / 1e6,
  }));
}

async function main() {
  const [command, ...rest] = process.argv.slice(2);
  if (command === 'encode') return encode(rest[0], rest[1], rest[2], rest[3]);
  if (command === 'decode') return decode(rest[0], rest[1], rest[2], rest[3], rest[4] === '--skip-special');
  if (command === 'derive-v4') return deriveV4(rest[0], rest[1]);
  if (command === 'bench') return bench(rest[0], rest[1], rest[2]);
  throw new Error(`unknown command '${command}' (encode | decode | derive-v4 | bench)`);
}
main().catch((err) => { console.error(err.stack || String(err)); process.exit(1); });
