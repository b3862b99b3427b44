// Compares build/bin/tokenize with the gpt-3-encoder package's own JavaScript encoder.
//   node compare_with_js.js VOCAB_DIR TEXT IDS DECODED NAME MIN_LINES MIN_TOKENS
// TEXT is read as Node reads text (fs.readFileSync(TEXT, 'utf8'): ill-formed UTF-8 becomes
// U+FFFD) and split on '\n'; a final '\n' ends the last line. IDS holds tokenize's output
// for TEXT, DECODED `tokenize --decode IDS`. Checks, line by line: the ids equal Encoder.js's
// encode(line); the decoded bytes equal the line's bytes (or, for a line that is not
// well-formed UTF-8, the bytes of Node's U+FFFD reading of it). Exit 1 on any difference,
// and when fewer than MIN_LINES lines or MIN_TOKENS tokens were compared (an empty or
// truncated corpus compares nothing and must not pass).
'use strict';
const fs = require('fs');
const path = require('path');

const [vocabDir, textPath, idsPath, decodedPath, name, minLinesArg, minTokensArg] = process.argv.slice(2);
const minLines = Number(minLinesArg), minTokens = Number(minTokensArg);
if (!(minLines > 0) || !(minTokens > 0)) {
  console.log(`FAIL: MIN_LINES and MIN_TOKENS must be positive numbers, got ${minLinesArg} ${minTokensArg}`);
  process.exit(2);
}
const { encode } = require(path.resolve(vocabDir, 'Encoder.js'));

// Lines of a string or a Buffer, split at '\n' with tokenize's rule for the last one.
function splitLines(x, sep) {
  const parts = [];
  let pos = 0;
  while (pos < x.length) {
    let eol = x.indexOf(sep, pos);
    if (eol < 0) eol = x.length;
    parts.push(x.slice(pos, eol));
    pos = eol + 1;
  }
  return parts;
}

const raw = fs.readFileSync(textPath);
const text = raw.toString('utf8');
const lines = splitLines(text, '\n');
const rawLines = splitLines(raw, 0x0a);
const idLines = splitLines(fs.readFileSync(idsPath, 'utf8'), '\n');
const decodedLines = splitLines(fs.readFileSync(decodedPath), 0x0a);

let failures = 0;
function fail(msg) {
  if (++failures <= 10) console.log(`  DIFF ${msg}`);
}
for (const [what, got] of [['tokenize output', idLines.length], ['decoded', decodedLines.length],
                           ['raw', rawLines.length]]) {
  if (got !== lines.length) fail(`${what} has ${got} lines, the text ${lines.length}`);
}

let idDiffs = 0, exact = 0, replaced = 0, roundTripDiffs = 0, tokens = 0;
for (let i = 0; i < lines.length; ++i) {
  const ids = encode(lines[i]);
  tokens += ids.length;
  const want = ids.join(' ');
  if (idLines[i] !== want) {
    ++idDiffs;
    fail(`line ${i + 1} ${JSON.stringify(lines[i]).slice(0, 200)}\n    js:  ${want}\n    c++: ${idLines[i]}`);
  }
  const wellFormed = Buffer.from(lines[i], 'utf8').equals(rawLines[i] || Buffer.alloc(0));
  const expect = wellFormed ? rawLines[i] : Buffer.from(lines[i], 'utf8');
  if (!decodedLines[i] || !decodedLines[i].equals(expect)) {
    ++roundTripDiffs;
    fail(`line ${i + 1}: decode(encode(x)) != ${wellFormed ? 'x' : "Node's U+FFFD reading of x"}`);
  } else if (wellFormed) {
    ++exact;
  } else {
    ++replaced;
  }
}
console.log(`${name}: ${lines.length} lines (${raw.length} bytes, ${tokens} tokens) compared with ` +
            `Encoder.js: ${idDiffs} different`);
console.log(`${name}: decode(encode(x)) == x on ${exact} lines; ${replaced} ill-formed UTF-8 lines ` +
            `decode to Node's U+FFFD reading; ${roundTripDiffs} different`);
let tooFew = false;
if (lines.length < minLines || tokens < minTokens) {
  console.log(`FAIL ${name}: only ${lines.length} lines and ${tokens} tokens compared, the minimum is ` +
              `${minLines} lines and ${minTokens} tokens: is the corpus empty or truncated?`);
  tooFew = true;
}
process.exit(failures || tooFew ? 1 : 0);
