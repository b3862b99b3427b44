#!/usr/bin/python3
"""Writes the tokenizer's hard set to standard output: lines chosen to stress GPT-2's split
pattern, BPE and the UTF-8 reading (accents, combining marks, CJK, emoji sequences, digit
runs, contractions, tabs, CR LF, space runs, Unicode spaces, ill-formed UTF-8, long
lines). Bytes are written exactly as listed; lines end with '\\n'."""
import sys

TEXT = [
    # Latin with accents, precomposed and combining
    "café naïve Ærøskøbing Ça va? El niño comió piñata, déjà vu, Straße, İstanbul, ﬁne",
    "cafe\u0301 e\u0301\u0301 a\u0308 n\u0303o Z\u0324\u0354\u0367\u0311\u0313a\u0356\u032d\u0308\u0307l\u036e\u0312\u036b",
    "\u0301 starts with a mark, ends with one\u0301",
    # other scripts (marks inside words: Hebrew niqqud, Devanagari, Thai)
    "Ελληνικά Русский текст العربية עִבְרִית हिन्दी ภาษาไทย ქართული Հայերեն አማርኛ",
    "日本語のテキスト、カタカナ・ひらがな。中文测试，标点。한국어 텍스트 ＡＢＣ１２３",
    "日本\u3000語\u3000\u3000テスト ー ǅ ʰ ꙮ",
    "𝐀𝐁𝐂 𝟏𝟐𝟑 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \U00020000\U0002A6D6 \U000E0001 \ue000 \uffff \U0010ffff",
    # emoji: skin tones, ZWJ sequences, flags, keycaps, variation selectors
    "😀 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇺🇸🇫🇷 ❤️ 1️⃣ #️⃣ 🧑🏿‍🚀 👩🏻‍❤️‍💋‍👨🏼",
    "I ❤️ NY 🗽!! emoji😀inside😀words and 😀😀😀 runs",
    # digits in runs, other number characters
    "1234567890 3.14159 1,000,000 v1.2.3 12345678901234567890123456789 007",
    "x²³ ½⅓¼ ٠١٢٣٤ ۱۲۳ १२३ Ⅻ ⅷ ① 2nd 3rd 10th 1e10 0x1F -42 +7",
    "a1b2c3 abc123def 123abc 12 34  56   78",
    # contractions, case-sensitive, and look-alikes
    "it's we'll THEY'RE 'RE 'Re 'll 'LL 's 'S ''s don't I'd've you're we've I'm",
    "'s'll're've'm'd't ' s rock 'n' roll ’s ‘quoted’ O'Neil 'tis '",
    "x's 1's ''' 'a '1 ' ' '  ' ",
    # tabs
    "\tindented\twith\ttabs",
    "a\tb \t c\t\td\t",
    "\t\t\t",
    "\t \t word",
    # runs of spaces before words, punctuation and digits, and at line ends
    "   leading spaces",
    "trailing spaces   ",
    "a  b   c    d     e",
    "a   ! b   123 c   😀 d    'll",
    " ",
    "  ",
    "          ",
    "   \t  word  \t  ",
    # NBSP and other Unicode spaces (JavaScript's \s), and characters that are not \s
    "a\u00a0b a\u00a0\u00a0b a \u00a0b a\u00a0 b \u00a0",
    "\u2003em\u2002en\u2009thin\u200ahair\u202fnarrow\u205fmath\u1680ogham\u3000ideo",
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a word",
    "line\u2028separator and paragraph\u2029separator",
    "\ufeffBOM at start and \ufeff inside",
    "not spaces: \u200bzero\u200cwidth\u200djoiner \u180emongolian \u0085NEL \u00adsoft \u2060wj",
    "controls: \x0bVT \x0cFF \x1fUS \x00NUL \x7fDEL \x1b[0m",
    "word\u3000\u3000",
    "word \u00a0",
    # CR as Windows line endings leave it, and alone
    "windows line\r",
    "\r",
    "a\rb \r c\r\r",
    # punctuation runs, JSON-like text (pairs the JS keys with a comma), code
    "Hello, world!!! ... -- ==> <== \"quoted\" (parens) [brackets] {braces}",
    "\",\" },\" ],[ '\"' \",\"key\":\"value\",\" ],\" ),\" .,\" ',\"",
    '{"a": [1, 2], "b": "c", "d": {"e": null}},{"f":"g"}',
    "for (int i = 0; i < n; ++i) { x[i] += y[i] * 2; } // comment",
    "https://example.com/path?query=1&b=2#frag user@example.org",
    "<|endoftext|> is text here, not the special token <|endoftext|>",
    # long pieces (BPE over thousands of symbols)
    "a" * 3000,
    "ab" * 2000,
    "=" * 800 + " " + "-" * 500,
    "9" * 1000,
    " " * 300 + "x",
    "x" + " " * 300,
    "supercalifragilisticexpialidocious antidisestablishmentarianism " * 20,
    "",
    "",
]

# Ill-formed UTF-8: Node reads each maximal subpart as U+FFFD (utf8.h).
BYTES = [
    b"\xff lone FF",
    b"abc\x80def",
    b"\xc3\x28 bad second byte",
    b"truncated \xe2\x82",
    b"truncated then ASCII \xe2\x82(",
    b"surrogate \xed\xa0\x80 encoded",
    b"above U+10FFFF \xf4\x90\x80\x80",
    b"overlong \xc0\xaf \xe0\x80\xaf \xf0\x80\x80\xaf",
    b"truncated emoji \xf0\x9f\x98 end",
    b"\xf0\x9f\x98",
    b"\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64",
    b"\xef\xbf\xbd is a real U+FFFD",
    b"\x80\x80\x80 continuation bytes first",
    b"\xfe\xfe\xff\xff",
    b"caf\xe9 Latin-1 text",
    b"mixed \xc3\xa9 good and \xe9 bad \xe2\x82\xac good",
]

out = sys.stdout.buffer
for line in TEXT:
    out.write(line.encode("utf-8") + b"\n")
for line in BYTES:
    out.write(line + b"\n")
# The last line has no '\n' (it still is a line).
out.write("last line without a newline 'll".encode("utf-8"))
