// GPT-2 tokenizer units: UTF-8 reading against the Unicode Standard's worked example,
// the split pattern on cases worked out by hand from the regular expression, vocabulary
// loading and its errors, and BPE (the heap order against a direct transcription of
// GPT-2's reference loop) on a tiny vocabulary. The real vocabulary is checked against
// the JavaScript encoder by compare_with_js.sh.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <random>

#include "data/data_error.h"
#include "data/tokenizer/byte_symbols.h"
#include "data/tokenizer/pretokenize.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/utf8.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_gpt2_vocab.h"

using namespace dpt::tokenizer;
using dpt::DataError;
using dpt::testing::TempDir;

namespace {

const std::string kFffd = "\xEF\xBF\xBD";

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for_each_piece(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

std::string repaired(std::string_view s) {
  std::string out;
  replace_ill_formed(s, out);
  return out;
}

// The message of the DataError that f throws ("" if none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

// GPT-2's encoder.py bpe(), transcribed: join every occurrence of the lowest-ranked pair
// in one left-to-right pass, repeat. Independent of bpe.cpp's heap.
std::vector<int32_t> reference_bpe(const Vocabulary& v, std::string_view piece) {
  std::vector<int32_t> word;
  for (unsigned char c : piece) word.push_back(v.byte_token(c));
  while (word.size() > 1) {
    const Merge* best = nullptr;
    int32_t first = 0, second = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const Merge* m = v.merge(word[i], word[i + 1]);
      if (m && (!best || m->rank < best->rank)) {
        best = m;
        first = word[i];
        second = word[i + 1];
      }
    }
    if (!best) break;
    std::vector<int32_t> next;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        next.push_back(best->result);
        i += 2;
      } else {
        next.push_back(word[i++]);
      }
    }
    word = std::move(next);
  }
  return word;
}

}  // namespace

TEST_CASE("utf8: maximal subparts become U+FFFD, as in the Unicode Standard's Table 3-8", "[utf8]") {
  // Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 -> a FFFD FFFD FFFD b FFFD c FFFD FFFD d
  CHECK(repaired("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64") ==
        "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d");
  CHECK(repaired("\xED\xA0\x80") == kFffd + kFffd + kFffd);          // a surrogate
  CHECK(repaired("\xC0\xAF") == kFffd + kFffd);                      // overlong
  CHECK(repaired("\xE0\x80\xAF") == kFffd + kFffd + kFffd);          // overlong
  CHECK(repaired("\xF4\x90\x80\x80") == kFffd + kFffd + kFffd + kFffd);  // above U+10FFFF
  CHECK(repaired("x\xE2\x82") == "x" + kFffd);                       // truncated at the end
  CHECK(repaired("\xE2\x82(") == kFffd + "(");
  CHECK(repaired("\xFF\xFE") == kFffd + kFffd);
  const std::string good = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xEF\xBF\xBF";
  CHECK(repaired(good) == good);
  CHECK_FALSE(first_ill_formed(good));
  CHECK(first_ill_formed("abc\xC3\xA9\x80") == size_t(5));
  CHECK(first_ill_formed("\xF0\x9F\x98") == size_t(0));

  size_t pos = 0;
  CHECK(decode_code_point("\xF0\x9F\x98\x80", pos) == char32_t(0x1F600));
  CHECK(pos == 4);
  pos = 0;
  CHECK_FALSE(decode_code_point("\xF1\x80\x80\xE1", pos));
  CHECK(pos == 3);  // the maximal subpart F1 80 80
}

TEST_CASE("utf8: GPT-2's byte symbols", "[utf8]") {
  const auto& s = byte_symbols();
  CHECK(s[' '] == 0x120);  // 'Ġ'
  CHECK(s['\n'] == 0x10A);  // 'Ċ'
  CHECK(s[0] == 0x100);
  CHECK(s['!'] == '!');
  CHECK(s[0xAD] == 0x143);  // the soft hyphen is the last one renumbered
  CHECK(s[0xFF] == 0xFF);
  std::vector<char32_t> sorted(s.begin(), s.end());
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());  // a bijection
  for (unsigned b = 0; b < 256; ++b) CHECK(symbol_byte(s[b]) == uint8_t(b));
  CHECK_FALSE(symbol_byte(0x20));  // a raw space is not a symbol
  CHECK(symbols_to_bytes("\xC4\xA0the") == std::string(" the"));
  char32_t bad = 0;
  CHECK_FALSE(symbols_to_bytes("a b", &bad));
  CHECK(bad == 0x20);
}

TEST_CASE("pretokenize: GPT-2's split pattern", "[pretokenize]") {
  using V = std::vector<std::string>;
  CHECK(pieces("Hello world") == V{"Hello", " world"});
  CHECK(pieces("Hello  world") == V{"Hello", " ", " world"});
  CHECK(pieces("a   ") == V{"a", "   "});
  CHECK(pieces("   ") == V{"   "});
  CHECK(pieces("it's we'll THEY'RE") == V{"it", "'s", " we", "'ll", " THEY", "'", "RE"});
  CHECK(pieces(" 's") == V{" '", "s"});
  CHECK(pieces("x''s") == V{"x", "''", "s"});
  CHECK(pieces("'s'll") == V{"'s", "'ll"});
  CHECK(pieces("a\tb") == V{"a", "\t", "b"});
  CHECK(pieces("a \tb") == V{"a", " ", "\t", "b"});
  CHECK(pieces("abc123def 456!?") == V{"abc", "123", "def", " 456", "!?"});
  CHECK(pieces("a !!") == V{"a", " !!"});
  CHECK(pieces("\r\n") == V{"\r\n"});
  CHECK(pieces("x\r\ny") == V{"x", "\r", "\n", "y"});
  // Unicode: NBSP and U+3000 are \s; U+0085 and a combining mark are "other"; U+FEFF is \s.
  CHECK(pieces("a\u00a0b") == V{"a", "\u00a0", "b"});
  CHECK(pieces("a \u00a0b") == V{"a", " ", "\u00a0", "b"});
  CHECK(pieces("x\u3000\u3000y") == V{"x", "\u3000", "\u3000", "y"});
  CHECK(pieces("x\u0085y") == V{"x", "\u0085", "y"});
  CHECK(pieces("\ufeffz") == V{"\ufeff", "z"});
  CHECK(pieces("cafe\u0301s") == V{"cafe", "\u0301", "s"});
  CHECK(pieces("日本 語") == V{"日本", " 語"});
  CHECK(pieces("😀😀 x") == V{"😀😀", " x"});
  CHECK(pieces("x²½ ٣") == V{"x", "²½", " ٣"});
}

TEST_CASE("vocabulary: both file layouts load the same tokens and merges", "[vocabulary]") {
  for (const bool hf : {true, false}) {
    TempDir dir("tok_vocab");
    dpt::testing::write_tiny_vocab(dir.str(), hf);
    const Vocabulary v = Vocabulary::load(dir.str());
    CHECK(v.size() == size_t(dpt::testing::tiny_eos_id() + 1));
    CHECK(v.num_merges() == dpt::testing::tiny_merges().size());
    CHECK(v.byte_token('h') == 'h');
    CHECK(v.token_bytes(dpt::testing::tiny_merge_id(8)) == " world");
    CHECK(v.end_of_text() == dpt::testing::tiny_eos_id());
    const Merge* m = v.merge('h', 'e');
    REQUIRE(m);
    CHECK(m->rank == 0);
    CHECK(m->result == dpt::testing::tiny_merge_id(0));
    CHECK_FALSE(v.merge('e', 'h'));
  }
}

TEST_CASE("vocabulary: errors name the directory, file and line", "[vocabulary]") {
  TempDir dir("tok_vocab_err");
  const std::string d = dir.str();
  CHECK_THAT(error_of([&] { Vocabulary::load(d + "/nope"); }),
             Catch::Contains("nope: tokenizer directory not found") && Catch::Contains("install_deps"));
  CHECK_THAT(error_of([&] { Vocabulary::load(d); }), Catch::Contains("no GPT-2 vocabulary"));
  auto files = dpt::testing::tiny_vocab_files();
  dpt::testing::write_text(d + "/vocab.json", files.json);
  CHECK_THAT(error_of([&] { Vocabulary::load(d); }),
             Catch::Contains("has vocab.json but not merges.txt"));

  auto expect = [&](const std::string& json, const std::string& merges, const std::string& what) {
    dpt::testing::write_tiny_vocab(d, true, {json, merges});
    INFO(what);
    CHECK_THAT(error_of([&] { Vocabulary::load(d); }), Catch::Contains(what));
  };
  const std::string& j = files.json;
  const std::string& m = files.merges;
  expect(j.substr(0, j.size() - 3), m, "vocab.json: not valid JSON");
  expect("[1, 2]", m, "vocab.json: expected a JSON object mapping token text to id, got an array");
  expect("{\"a\": 0, \"b\": 5}", m, "token \"b\": id 5 is not in 0..1");
  expect("{\"a\": 0, \"b\": 1.5}", m, "token \"b\": id 1.5 is not an integer");
  expect("{\"a\": 0, \"b\": {}}", m, "token \"b\": id an object is not an integer");
  expect("{\"a\": 0, \"a\": 1}", m, "token \"a\" appears twice");
  expect("{\"a\": 0, \"b\": 0}", m, "id 0 is given to two tokens");
  expect("{\"a\": 0, \"x y\": 1}", m, "has the character U+0020, which is not one of GPT-2's 256");
  expect("{\"a\": 0, \"b\": 1}", m, "no token for the byte 0");
  expect(j, m + "a b c\n", "merges.txt: line 14: expected two tokens separated by a space, got 3");
  expect(j, m + "h q\n", "merges.txt: line 14: the merged token \"hq\" is not in the vocabulary");
  expect(j, m + "he ll\n", "merges.txt: line 14: the merge \"he ll\" is repeated");
  expect(j, "#version: 0.2\nhe ll\n", "line 2: token \"he\" is used before any merge creates it");
  expect(j, "#version: 0.2\na\xC4\xA0 b\n", "line 2: token \"a\xC4\xA0\" is not in the vocabulary");
  expect(j, "#version: 0.2\n", "merges.txt: no merges");
}

TEST_CASE("tokenizer: BPE on the tiny vocabulary, decode, cache", "[tokenizer]") {
  TempDir dir("tok_bpe");
  dpt::testing::write_tiny_vocab(dir.str(), false);
  Gpt2Tokenizer tok(dir.str());
  const auto id = dpt::testing::tiny_merge_id;
  using V = std::vector<int32_t>;
  CHECK(tok.encode("hello world") == V{id(3), id(8)});
  CHECK(tok.encode("hell") == V{id(2)});
  CHECK(tok.encode("aaa") == V{id(9), 'a'});  // leftmost pair first
  CHECK(tok.encode("aaaa") == V{id(9), id(9)});
  CHECK(tok.encode("he's") == V{id(0), id(11)});
  CHECK(tok.encode("a   w") == V{'a', id(10), id(4)});
  CHECK(tok.encode("") == V{});
  // <|endoftext|> in text is text: not the special token.
  const V eot = tok.encode("<|endoftext|>");
  CHECK(eot.size() > 1);
  CHECK(std::find(eot.begin(), eot.end(), tok.end_of_text()) == eot.end());
  CHECK(tok.end_of_text() == dpt::testing::tiny_eos_id());
  // Ill-formed UTF-8 is encoded as U+FFFD's bytes.
  CHECK(tok.encode("x\xFFy") == tok.encode("x" + kFffd + "y"));

  CHECK(tok.decode(V{id(3), id(8), ' ', id(10)}) == "hello world   ");
  CHECK(tok.decode(V{tok.end_of_text()}) == "<|endoftext|>");
  CHECK_THROWS_WITH(tok.decode(V{'a', 999}),
                    Catch::Contains("token 2 (id 999) is not in the vocabulary"));
  CHECK_THROWS_AS(tok.decode(V{-1}), std::out_of_range);
}

TEST_CASE("tokenizer: the heap order equals GPT-2's reference loop", "[tokenizer]") {
  TempDir dir("tok_ref");
  dpt::testing::write_tiny_vocab(dir.str());
  Gpt2Tokenizer tok(Vocabulary::load(dir.str()), 0);  // no cache: BPE every time
  std::mt19937 rng(7);
  const std::string alphabet = "helloworda '";
  size_t checked = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text(rng() % 300, ' ');
    for (char& c : text) c = alphabet[rng() % alphabet.size()];
    std::vector<int32_t> want;
    for_each_piece(text, [&](std::string_view p) {
      const auto ids = reference_bpe(tok.vocab(), p);
      want.insert(want.end(), ids.begin(), ids.end());
    });
    REQUIRE(tok.encode(text) == want);
    CHECK(tok.decode(want) == text);
    checked += text.size();
  }
  CHECK(checked > 100000);
  // One piece of 20000 letters: n log n with the heap.
  const std::string long_piece(20000, 'a');
  CHECK(tok.encode(long_piece) == std::vector<int32_t>(10000, dpt::testing::tiny_merge_id(9)));
}

TEST_CASE("tokenizer: the word cache stops growing at its capacity", "[tokenizer]") {
  TempDir dir("tok_cache");
  dpt::testing::write_tiny_vocab(dir.str());
  Gpt2Tokenizer cached(dir.str(), 3), uncached(dir.str(), 0);
  const std::string text = "hello world hello wor worl he aaa aaaa hello";
  CHECK(cached.encode(text) == uncached.encode(text));
  CHECK(cached.encode(text) == uncached.encode(text));  // now from the cache
  CHECK(cached.cache_size() == 3);
  CHECK(uncached.cache_size() == 0);
}
