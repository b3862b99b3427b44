// Compares the tokenizer's character classes (print_char_classes' output on stdin) with
// JavaScript's own \p{L}, \p{N} and \s under the `u` flag, the classes of the split
// pattern in the gpt-3-encoder package, for every code point but the surrogates.
// A difference is allowed only where ICU (ours) has the code point unassigned and this
// Node's newer Unicode has assigned it; any other difference fails.
'use strict';
const fs = require('fs');
const ours = fs.readFileSync(0, 'latin1');
if (ours.length !== 0x110000) {
  console.log(`FAIL: expected 0x110000 classes, got ${ours.length}`);
  process.exit(1);
}
const L = /^\p{L}$/u, N = /^\p{N}$/u, S = /^\s$/u;
let compared = 0, newer = 0, wrong = 0;
for (let cp = 0; cp < 0x110000; ++cp) {
  if (cp >= 0xd800 && cp <= 0xdfff) continue;
  const ch = String.fromCodePoint(cp);
  const js = L.test(ch) ? 'L' : N.test(ch) ? 'N' : S.test(ch) ? 'S' : 'O';
  const mine = ours[cp].toUpperCase();
  ++compared;
  if (js === mine) continue;
  const unassignedInIcu = ours[cp] !== mine;
  if (unassignedInIcu && mine === 'O') {
    ++newer;
    continue;
  }
  if (++wrong <= 20) {
    console.log(`  DIFF U+${cp.toString(16).toUpperCase().padStart(4, '0')}: js ${js}, ours ${ours[cp]}`);
  }
}
console.log(`char classes: ${compared} code points compared with Node ${process.versions.node} ` +
            `(Unicode ${process.versions.unicode}): ${wrong} different; ${newer} assigned only ` +
            `after our ICU's Unicode version (other to us, letter/number to this Node)`);
process.exit(wrong ? 1 : 0);
