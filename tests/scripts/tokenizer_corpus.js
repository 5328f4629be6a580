#!/usr/bin/env node
// Deterministic corpus for the tokenizer conformance test and benchmark.
//
//   node tokenizer_corpus.js [--seed N] [--count N] > corpus.jsonl
//
// Writes one JSON string per line. Everything is generated from a seeded PRNG (no
// downloads), so the same seed always gives the same corpus. The corpus is meant to
// hit every branch of DeepSeek's pre-tokenizer: digit runs of every length, CJK /
// kana runs, punctuation glued to letters, whitespace and newline runs (\r\n, tabs,
// Unicode spaces), emoji and ZWJ sequences, combining marks, special tokens inside
// text, code, and long inputs of several KB.
'use strict';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const SEED = option('--seed', 20240601);
const COUNT = option('--count', 12000);

// mulberry32: small, fast, and good enough to vary text.
let state = SEED >>> 0;
function random() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));  // inclusive
const pick = (list) => list[Math.floor(random() * list.length)];
const repeat = (n, make) => Array.from({ length: n }, make).join('');
const chr = (cp) => String.fromCodePoint(cp);
const fromRange = (lo, hi) => chr(int(lo, hi));

const WORDS = (
  'the of and to in is you that it he was for on are as with his they at be this have from or one had by ' +
  'word but not what all were we when your can said there use an each which she do how their if will up ' +
  'other about out many then them these so some her would make like him into time has look two more write ' +
  'go see number no way could people my than first water been call who oil its now find long down day did ' +
  'get come made may part tokenizer encoder decoder model inference speculative decoding attention layer ' +
  'tensor kernel matrix vector expert router cache prefix suffix DeepSeek Hugging Face GPU CPU API JSON HTTP ' +
  "don't can't it's we're they've I'm you'll she'd O'Neil rock'n'roll naïve café résumé coöperate façade"
).split(' ');
const PUNCT = ['.', ',', '!', '?', ';', ':', '...', '—', '–', '-', '"', "'", '(', ')', '[', ']', '{', '}', '/', '\\',
  '@', '#', '$', '%', '^', '&', '*', '_', '+', '=', '<', '>', '|', '~', '`', '«', '»', '¿', '¡', '§', '©', '®', '°', '±', '€', '£', '¥'];
const CJK_PUNCT = ['，', '。', '！', '？', '、', '；', '：', '“', '”', '‘', '’', '（', '）', '《', '》', '【', '】', '「', '」', '『', '』', '…', '—', '·', '～'];
const COMMON_HANZI = '的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明社长';
const KANA_TEXT = ['こんにちは', 'ありがとうございます', 'トークナイザー', 'コンピューター', 'ひらがな', 'カタカナ', 'です', 'ます', 'ラーメン', 'ゔ', 'ヴァイオリン', 'ㇰㇱ', 'ｱｲｳｴｵ'];
const SCRIPTS = [
  () => fromRange(0xac00, 0xd7a3),                // Hangul syllables
  () => fromRange(0x0410, 0x044f),                // Cyrillic
  () => fromRange(0x03b1, 0x03c9),                // Greek
  () => fromRange(0x0627, 0x064a),                // Arabic letters
  () => fromRange(0x05d0, 0x05ea),                // Hebrew
  () => fromRange(0x0915, 0x0939) + pick(['', '\u093f', '\u0947', '\u094d', '\u0902']),  // Devanagari + signs
  () => fromRange(0x0e01, 0x0e2e) + pick(['', '\u0e31', '\u0e34', '\u0e48', '\u0e49']),  // Thai + marks
  () => pick('aeiouncAEIOUNC') + pick(['\u0301', '\u0300', '\u0308', '\u0303', '\u0327', '\u030c']),  // combining
  () => fromRange(0x00c0, 0x017f),                // Latin-1 / Extended-A
  () => fromRange(0x1e00, 0x1eff),                // Latin Extended Additional
  () => fromRange(0x0531, 0x0556),                // Armenian
  () => fromRange(0x10a0, 0x10c5),                // Georgian
  () => fromRange(0x1200, 0x1248),                // Ethiopic
  () => fromRange(0x0b85, 0x0bb9),                // Tamil
  () => fromRange(0x3400, 0x4dbf),                // CJK extension A (outside DeepSeek's CJK class)
  () => fromRange(0x20000, 0x2a6df),              // CJK extension B (astral)
  () => fromRange(0x9fa6, 0x9fff),                // CJK just past the class's U+9FA5 bound
  () => fromRange(0x1d400, 0x1d4ff),              // mathematical alphanumerics
  () => fromRange(0xff01, 0xff5e),                // fullwidth ASCII
];
const EMOJI = ['😀', '😂', '🥲', '🤖', '🚀', '🔥', '✨', '❤️', '👍🏽', '👋🏿', '🇨🇳', '🇯🇵', '🇺🇸', '🏳️‍🌈', '🏴‍☠️',
  '👨‍👩‍👧‍👦', '👩‍💻', '🧑🏻‍🔬', '👨🏾‍🦰', '❤️‍🔥', '🫠', '🫶🏼', '🩷', '🫨', '1️⃣', '#️⃣', '©️', '☺︎', '🀄', '🂡', '⌚', '🏻'];
const SPACES = [' ', '  ', '   ', '\t', '\n', '\r\n', '\r', '\n\n', ' \n', '\t\t', '\u00a0', '\u3000', '\u2003', '\u2009',
  '\u202f', '\u205f', '\u2028', '\u2029', '\u0085', '\u000b', '\u000c', '\u180e', '\u200b', '\ufeff', '\u200d', '\u1680'];
const SPECIAL = ['<｜begin▁of▁sentence｜>', '<｜end▁of▁sentence｜>', '<｜▁pad▁｜>', '<｜User｜>', '<｜Assistant｜>', '<|EOT|>',
  '<｜fim▁hole｜>', '<｜fim▁begin｜>', '<｜fim▁end｜>', '<｜tool▁calls▁begin｜>', '<｜tool▁call▁begin｜>', '<｜tool▁sep｜>',
  '<｜tool▁call▁end｜>', '<｜tool▁calls▁end｜>', '<｜tool▁outputs▁begin｜>', '<｜tool▁output▁begin｜>', '<｜tool▁output▁end｜>',
  '<｜tool▁outputs▁end｜>', '<｜place▁holder▁no▁0｜>', '<｜place▁holder▁no▁17｜>', '<｜place▁holder▁no▁799｜>',
  // V4's additions (tokens only in the derived V4-like and toy tokenizers)
  '<think>', '</think>', '<｜latest_reminder｜>', '｜DSML｜', '<｜DSML｜tool_calls>', '<｜action｜>', '<｜query｜>', '<｜title｜>',
  // near misses: must be split like ordinary text
  '<｜User', '｜User｜>', '<｜Use｜>', '<<｜User｜>>', '<｜user｜>', '<|User|>', '<think', 'think>', '<｜place▁holder▁no▁', '｜DSML',
  // flags of the toy tokenizer's added tokens: lstrip / rstrip / single_word / longest match
  '  [LSTRIP]', '[LSTRIP]  x', ' \t[RSTRIP] \n y', '[RSTRIP][LSTRIP]', ' word ', 'words', 'sword', 'word!', '_word', 'wordé',
  'hello world', 'hello worlds', 'othello', '▁of▁', 'the\n\n\nthe'];

function word() {
  const w = pick(WORDS);
  const r = random();
  if (r < 0.1) return w.toUpperCase();
  if (r < 0.25) return w[0].toUpperCase() + w.slice(1);
  return w;
}
function number() {
  const r = random();
  const digits = (n) => repeat(n, () => String(int(0, 9)));
  if (r < 0.5) return digits(int(1, 40));
  if (r < 0.6) return digits(int(1, 6)) + '.' + digits(int(1, 8));
  if (r < 0.7) return '-' + digits(int(1, 12)) + pick(['', 'e' + int(-30, 30), '%', 'px', 'th']);
  if (r < 0.8) return repeat(int(1, 6), () => digits(int(1, 4))).replace(/(\d)(?=(\d{3})+$)/g, '$1,');
  if (r < 0.85) return repeat(int(1, 10), () => chr(0xff10 + int(0, 9)));  // fullwidth digits
  if (r < 0.9) return repeat(int(1, 8), () => chr(0x0660 + int(0, 9)));   // Arabic-Indic digits
  if (r < 0.95) return pick(['²', '³', '¹', '½', '¾', 'Ⅻ', 'ⅷ', '①', '⑳', '〇', '٣', '߁', '𝟘', '𝟗']) + digits(int(0, 5));
  return '0x' + int(0, 0xffffffff).toString(16) + pick(['', 'ULL', 'u']);
}
function english(words) {
  let out = '';
  for (let i = 0; i < words; i++) {
    const r = random();
    if (i) out += random() < 0.9 ? ' ' : pick(SPACES.slice(0, 10));
    if (r < 0.75) out += word();
    else if (r < 0.85) out += number();
    else if (r < 0.95) out += pick(PUNCT) + word() + (random() < 0.5 ? pick(PUNCT) : '');
    else out += pick(PUNCT) + pick(PUNCT);
  }
  return out + pick(['.', '!', '?', '', '...', ':', '\n']);
}
function chinese(chars) {
  let out = '';
  for (let i = 0; i < chars; i++) {
    const r = random();
    if (r < 0.75) out += COMMON_HANZI[int(0, COMMON_HANZI.length - 1)];
    else if (r < 0.85) out += fromRange(0x4e00, 0x9fa5);
    else if (r < 0.93) out += pick(CJK_PUNCT);
    else if (r < 0.97) out += number();
    else out += ' ' + word() + ' ';
  }
  return out;
}
function japanese(parts) {
  let out = '';
  for (let i = 0; i < parts; i++) {
    const r = random();
    if (r < 0.35) out += pick(KANA_TEXT);
    else if (r < 0.55) out += repeat(int(1, 6), () => fromRange(0x3041, 0x3096));
    else if (r < 0.7) out += repeat(int(1, 6), () => fromRange(0x30a1, 0x30fa)) + (random() < 0.3 ? 'ー' : '');
    else if (r < 0.85) out += chinese(int(1, 4));
    else out += pick(['。', '、', '「', '」', '・', '！', '？']);
  }
  return out;
}
function otherScripts(n) {
  let out = '';
  for (let i = 0; i < n; i++) {
    const script = pick(SCRIPTS);
    out += repeat(int(1, 8), script) + (random() < 0.7 ? ' ' : pick(PUNCT));
  }
  return out;
}
function emoji(n) {
  let out = '';
  for (let i = 0; i < n; i++) out += pick(EMOJI) + (random() < 0.4 ? pick([' ', '', '!', word(), '\n']) : '');
  return out;
}
function whitespace() {
  const r = random();
  if (r < 0.3) return repeat(int(1, 12), () => pick(SPACES));
  if (r < 0.5) return ' '.repeat(int(1, 200));
  if (r < 0.6) return '\t'.repeat(int(1, 20)) + word();
  if (r < 0.7) return repeat(int(1, 30), () => pick(['\r\n', '\n', '\r', ' \r\n', '\t\n']));
  if (r < 0.85) return word() + repeat(int(1, 6), () => pick(SPACES)) + word() + pick(SPACES);
  return pick(SPACES) + english(int(1, 6)) + repeat(int(1, 5), () => pick(SPACES));
}
function specials() {
  let out = '';
  const n = int(1, 6);
  for (let i = 0; i < n; i++) {
    const r = random();
    out += pick(SPECIAL);
    if (r < 0.3) out += english(int(1, 5));
    else if (r < 0.45) out += chinese(int(1, 6));
    else if (r < 0.6) out += pick(SPACES);
    else if (r < 0.7) out += number();
  }
  return out;
}
const CODE = [
  () => `def ${word()}_${int(0, 99)}(x, y=${int(0, 9)}):\n    """${english(int(2, 6))}"""\n    return x ** ${int(2, 5)} + y  # ${word()}\n`,
  () => `for (int i = 0; i < ${int(1, 1000)}; ++i) {\n\tsum += a[i] * b[i];\n}\n`,
  () => `const ${word()} = await fetch("https://example.com/api/v${int(1, 3)}/${word()}?id=${number()}&q=${word()}");`,
  () => JSON.stringify({ name: word(), count: int(0, 1e6), tags: [word(), word()], nested: { ok: random() < 0.5, v: random() } }, null, int(0, 4)),
  () => `<div class="${word()}">${english(int(1, 5))}</div>\n<!-- ${word()} -->`,
  () => `$ ls -la /usr/lib/x86_64-linux-gnu | grep -E '^d' | wc -l\n${int(0, 500)}\n`,
  () => `std::vector<std::pair<int32_t, float>> v{{${int(0, 9)}, ${random().toFixed(3)}f}};  // ${word()}`,
  () => `SELECT ${word()}, COUNT(*) FROM t_${word()} WHERE id >= ${int(0, 9999)} GROUP BY 1 ORDER BY 2 DESC;`,
  () => `| ${word()} | ${number()} | ${chinese(int(1, 3))} |\n|---|---:|:---:|\n`,
  () => `\\frac{\\partial L}{\\partial w_{${int(1, 9)}}} = \\sum_{i=1}^{N} (y_i - \\hat{y}_i)^2`,
  () => `if x != nil && len(x) > 0 {\n        return fmt.Errorf("bad %s: %w", name, err)\n    }`,
  () => `    ${'    '.repeat(int(0, 4))}${word()}.${word()}(${int(0, 9)})${pick([';', '', ',', ')'])}\n`,
  () => `user@example.com; https://github.com/deepseek-ai/DeepSeek-V3/blob/main/README.md#L${int(1, 500)}`,
];
function code() {
  return repeat(int(1, 3), () => pick(CODE)());
}
function randomUnicode(n) {
  // Any scalar value, unassigned and private-use included (no surrogates).
  let out = '';
  for (let i = 0; i < n; i++) {
    const r = random();
    let cp;
    if (r < 0.4) cp = int(0, 0x7f);
    else if (r < 0.7) cp = int(0x80, 0xffff);
    else if (r < 0.9) cp = int(0x10000, 0x2ffff);
    else cp = int(0x30000, 0x10ffff);
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
    out += chr(cp);
  }
  return out;
}
function mixed() {
  const parts = [english, chinese, japanese, otherScripts, emoji];
  return repeat(int(2, 6), () => pick(parts)(int(1, 8)) + (random() < 0.5 ? pick(SPACES) : ''));
}
function chatLike() {
  return `<｜begin▁of▁sentence｜>${english(int(3, 12))}<｜User｜>${mixed()}<｜Assistant｜><think>${english(int(5, 20))}</think>` +
    `${chinese(int(5, 30))}<｜end▁of▁sentence｜>`;
}

// Weighted generators; the long category concatenates the others to several KB.
const GENERATORS = [
  [16, () => english(int(1, 40))],
  [10, () => chinese(int(1, 60))],
  [7, () => japanese(int(1, 12))],
  [7, () => otherScripts(int(1, 10))],
  [8, () => number() + (random() < 0.5 ? pick([' ', '', 'abc', '年', '.', '\n']) + number() : '')],
  [9, () => code()],
  [9, () => whitespace()],
  [6, () => emoji(int(1, 10))],
  [7, () => specials()],
  [8, () => mixed()],
  [4, () => randomUnicode(int(1, 30))],
  [3, () => chatLike()],
  [2, () => { let s = ''; const target = int(2000, 12000); while (s.length < target) s += pick(GENERATORS.slice(0, 10))[1]() + pick(SPACES); return s; }],
];
const TOTAL_WEIGHT = GENERATORS.reduce((sum, [w]) => sum + w, 0);
function generate() {
  let r = random() * TOTAL_WEIGHT;
  for (const [w, make] of GENERATORS) {
    if ((r -= w) < 0) return make();
  }
  return GENERATORS[0][1]();
}

// Fixed cases first: the empty string, every ASCII character alone, special tokens alone,
// white space, digit runs of every length.
const lines = [''];
for (let c = 0; c < 128; c++) lines.push(chr(c));
for (const s of SPECIAL) lines.push(s);
for (const s of SPACES) lines.push(s, s + s, 'a' + s + 'b', s + '1');
for (let n = 1; n <= 64; n++) lines.push('7'.repeat(n), 'x' + '1234567890'.repeat(7).slice(0, n) + 'y');
// Every scalar value of the planes in use (BMP, SMP, SIP, TIP, tags) in runs of 1024
// consecutive code points, and a sample of the unassigned and private-use planes:
// each character meets the pre-tokenizer's Unicode classes at least once.
const everyCodePoint = [];
for (let cp = 0; cp <= 0x323af; cp++) if (cp < 0xd800 || cp > 0xdfff) everyCodePoint.push(cp);
for (let cp = 0xe0000; cp <= 0xe01ef; cp++) everyCodePoint.push(cp);
for (let cp = 0x40000; cp <= 0x10ffff; cp += 4099) everyCodePoint.push(cp);
for (let i = 0; i < everyCodePoint.length; i += 1024) {
  lines.push(String.fromCodePoint(...everyCodePoint.slice(i, i + 1024)));
}
while (lines.length < COUNT) lines.push(generate());
process.stdout.write(lines.map((s) => JSON.stringify(s)).join('\n') + '\n');
