#!/usr/bin/env node
// Compares our tokenizer's output with the reference's, line by line.
//
//   node tokenizer_compare.js LABEL CORPUS REF_IDS OUR_IDS REF_TEXT OUR_TEXT REF_SKIP_TEXT OUR_SKIP_TEXT [--lossy]
//
// Checks, for every corpus string s: identical ids; identical decoding, with and
// without special tokens; and decode(encode(s)) == s, unless --lossy (a tokenizer
// whose added tokens strip white space cannot give the text back). Prints the counts
// and the first few differences; exits 1 on any mismatch or a corpus under 10,000 strings.
'use strict';

const fs = require('fs');

const [label, corpusFile, refIdsFile, ourIdsFile, refTextFile, ourTextFile, refSkipFile, ourSkipFile, lossyFlag] =
  process.argv.slice(2);
const lossy = lossyFlag === '--lossy';
const readLines = (file) => fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));

const corpus = readLines(corpusFile);
// tokenizer_conformance.sh promises >= 10,000 strings: a truncated or empty corpus must fail,
// not pass with nothing compared.
const kMinCorpus = 10000;
if (corpus.length < kMinCorpus) {
  console.error(`${label}: corpus has ${corpus.length} strings, fewer than the required ${kMinCorpus}`);
  process.exit(1);
}
const refIds = readLines(refIdsFile);
const ourIds = readLines(ourIdsFile);
const refText = readLines(refTextFile);
const ourText = readLines(ourTextFile);
const refSkip = readLines(refSkipFile);
const ourSkip = readLines(ourSkipFile);
for (const [name, list] of [['reference ids', refIds], ['our ids', ourIds], ['reference decode', refText], ['our decode', ourText],
  ['reference skip-special decode', refSkip], ['our skip-special decode', ourSkip]]) {
  if (list.length !== corpus.length) {
    console.error(`${label}: ${name} has ${list.length} lines for ${corpus.length} corpus strings`);
    process.exit(1);
  }
}

const preview = (s) => JSON.stringify(s.length > 120 ? s.slice(0, 120) + '…' : s);
let idMismatches = 0, roundTripFailures = 0, decodeMismatches = 0, bytes = 0, tokens = 0;
const shown = [];
for (let i = 0; i < corpus.length; i++) {
  bytes += Buffer.byteLength(corpus[i], 'utf8');
  tokens += refIds[i].length;
  const a = refIds[i], b = ourIds[i];
  if (a.length !== b.length || a.some((id, k) => id !== b[k])) {
    idMismatches++;
    if (shown.length < 8) {
      let k = 0;
      while (k < a.length && a[k] === b[k]) k++;
      shown.push(`  ids differ on line ${i + 1} ${preview(corpus[i])} at token ${k}: ` +
        `reference ${JSON.stringify(a.slice(k, k + 8))} ours ${JSON.stringify(b.slice(k, k + 8))}`);
    }
  }
  if (!lossy && ourText[i] !== corpus[i]) {
    roundTripFailures++;
    if (shown.length < 8) shown.push(`  round trip fails on line ${i + 1}: ${preview(corpus[i])} -> ${preview(ourText[i])}`);
  }
  for (const [kind, ref, ours] of [['decode', refText[i], ourText[i]], ['skip-special decode', refSkip[i], ourSkip[i]]]) {
    if (ref === ours) continue;
    decodeMismatches++;
    if (shown.length < 8) shown.push(`  ${kind} differs on line ${i + 1}: reference ${preview(ref)} ours ${preview(ours)}`);
  }
}
console.log(`${label}: corpus ${corpus.length} strings (${bytes} bytes, ${tokens} tokens): ` +
  `${idMismatches} id mismatches, ${decodeMismatches} decode mismatches, ` +
  (lossy ? 'round trip not required' : `${roundTripFailures} round-trip failures`));
for (const line of shown) console.log(line);
process.exit(idMismatches + roundTripFailures + decodeMismatches === 0 ? 0 : 1);
