// The JavaScript side of tokenizer_speed.sh: the gpt-3-encoder package's encode() on each
// line of a file, printed as build/bin/tokenize prints it (ids separated by spaces, one
// line per line; the file read as Node reads text, split on '\n').
//   node tokenizer_speed.js VOCAB_DIR FILE > ids
'use strict';
const fs = require('fs');
const path = require('path');
const { encode } = require(path.resolve(process.argv[2], 'Encoder.js'));
const text = fs.readFileSync(process.argv[3], 'utf8');
const lines = text.split('\n');
if (text.endsWith('\n')) lines.pop();
const out = [];
for (const line of lines) out.push(encode(line).join(' ') + '\n');
fs.writeSync(1, out.join(''));
