// text-docs: documents read from lines, JSON lines and fortune files; each tokenized,
// truncated, right-padded with <|endoftext|>; labels shifted by one with kIgnoreLabel at
// the last token and the padding; the held-out slice; errors naming file and line. A tiny
// vocabulary (tests/support/tiny_gpt2_vocab.h) keeps the expected ids checkable by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "data/batch.h"
#include "data/data_error.h"
#include "data/text/documents.h"
#include "data/make_dataset.h"
#include "data/files/read_file.h"
#include "data/text/text_corpus.h"
#include "data/text/text_docs.h"
#include "data_test_files.h"
#include "tests/support/tiny_gpt2_vocab.h"

using dpt::Batch;
using dpt::DocFormat;
using dpt::kIgnoreLabel;
using dpt::Split;
using dpt::TextDocs;
using dpt::testing::TempDir;
using dpt::testing::write_text;

namespace {

constexpr int32_t I = kIgnoreLabel;

// A scratch directory with the tiny vocabulary in "vocab/".
struct Fixture {
  TempDir dir{"text_docs"};
  std::string vocab = dir.file("vocab");
  Fixture() {
    std::filesystem::create_directory(vocab);
    dpt::testing::write_tiny_vocab(vocab);
  }
  std::unique_ptr<dpt::Dataset> make(const std::string& file, Split split, size_t seq_len,
                                     double val_fraction, const std::string& field = "") {
    dpt::DatasetOptions o;
    o.path = file;
    o.tokenizer_dir = vocab;
    o.seq_len = seq_len;
    o.val_fraction = val_fraction;
    o.jsonl_field = field;
    return dpt::make_dataset("text-docs", split, o);
  }
};

std::vector<int32_t> row(const std::vector<int32_t>& v, size_t r, size_t len) {
  return {v.begin() + std::ptrdiff_t(r * len), v.begin() + std::ptrdiff_t((r + 1) * len)};
}

}  // namespace

TEST_CASE("text_docs: truncation, padding with <|endoftext|>, shifted labels", "[text_docs]") {
  Fixture f;
  const auto id = dpt::testing::tiny_merge_id;
  const int32_t eos = dpt::testing::tiny_eos_id();
  // Tokens (tiny vocabulary): "hello world" = [hello, Ġworld]; "aaaa" = [aa, aa];
  // "he" = [he]; "hello hello hello world" = [hello, Ġ, hello, Ġ, hello, Ġworld] (there is
  // no "Ġh" merge). Empty lines are skipped; the '\r' of a CRLF line is dropped.
  write_text(f.dir.file("docs.txt"), "hello world\n\naaaa\r\nhe\n\n\nhello hello hello world\n");
  const auto ds = f.make(f.dir.file("docs.txt"), Split::train, 4, 0.0);
  REQUIRE(ds->size() == 4);
  CHECK(ds->name() == "text-docs/train");
  Batch b;
  ds->fill(std::vector<size_t>{0, 1, 2, 3}, b);
  REQUIRE(b.n == 4);
  CHECK(b.sample_shape == std::vector<int64_t>{4});
  CHECK(b.x.empty());
  CHECK(row(b.tokens, 0, 4) == std::vector<int32_t>{id(3), id(8), eos, eos});
  CHECK(row(b.labels, 0, 4) == std::vector<int32_t>{id(8), I, I, I});
  CHECK(row(b.tokens, 1, 4) == std::vector<int32_t>{id(9), id(9), eos, eos});
  CHECK(row(b.labels, 1, 4) == std::vector<int32_t>{id(9), I, I, I});
  CHECK(row(b.tokens, 2, 4) == std::vector<int32_t>{id(0), eos, eos, eos});  // no target at all
  CHECK(row(b.labels, 2, 4) == std::vector<int32_t>{I, I, I, I});
  // Truncated to seq_len = 4 tokens: 3 targets, the 4th position has no next token.
  CHECK(row(b.tokens, 3, 4) == std::vector<int32_t>{id(3), ' ', id(3), ' '});
  CHECK(row(b.labels, 3, 4) == std::vector<int32_t>{' ', id(3), ' ', I});
  CHECK(dpt::count_targets(b) == 1 + 1 + 0 + 3);
  CHECK(dynamic_cast<const TextDocs&>(*ds).num_truncated() == 1);
  CHECK(dynamic_cast<const TextDocs&>(*ds).pad_id() == eos);

  // Any order, any repeats.
  ds->fill(std::vector<size_t>{3, 0, 3}, b);
  CHECK(row(b.tokens, 1, 4) == std::vector<int32_t>{id(3), id(8), eos, eos});
  CHECK(row(b.labels, 2, 4) == std::vector<int32_t>{' ', id(3), ' ', I});
  CHECK_THROWS_AS(ds->fill(std::vector<size_t>{4}, b), std::out_of_range);
}

TEST_CASE("text_docs: the held-out slice is every 1/f-th document", "[text_docs]") {
  Fixture f;
  std::string text;
  for (int i = 0; i < 10; ++i) text += std::string(size_t(i + 1), 'a') + "\n";  // doc i: i+1 a's
  write_text(f.dir.file("ten.txt"), text);
  const auto train = f.make(f.dir.file("ten.txt"), Split::train, 16, 0.25);
  const auto test = f.make(f.dir.file("ten.txt"), Split::test, 16, 0.25);
  // floor((i+1)/4) > floor(i/4) for i = 3, 7: two held out, eight train.
  REQUIRE(test->size() == 2);
  REQUIRE(train->size() == 8);
  auto doc_length = [](const dpt::Dataset& ds, size_t i) {  // tokens of "a" x n: ceil(n/2)
    return dynamic_cast<const TextDocs&>(ds).document_tokens(i).size();
  };
  CHECK(doc_length(*test, 0) == 2);  // document 3: 4 a's
  CHECK(doc_length(*test, 1) == 4);  // document 7: 8 a's
  const std::vector<size_t> train_docs = {0, 1, 2, 4, 5, 6, 8, 9};
  for (size_t k = 0; k < train_docs.size(); ++k) CHECK(doc_length(*train, k) == (train_docs[k] + 2) / 2);
  CHECK(f.make(f.dir.file("ten.txt"), Split::test, 16, 0.1)->size() == 1);  // document 9

  // Too small a held-out slice, an empty train split, bad parameters: clear errors.
  CHECK_THROWS_WITH(f.make(f.dir.file("ten.txt"), Split::test, 16, 0.05),
                    Catch::Contains("text-docs/test: no documents in this split (10 documents") &&
                        Catch::Contains("holds out 0"));
  CHECK_THROWS_WITH(f.make(f.dir.file("ten.txt"), Split::test, 16, 0.0),
                    Catch::Contains("no documents in this split"));
  write_text(f.dir.file("one.txt"), "hello\n");
  CHECK_THROWS_WITH(f.make(f.dir.file("one.txt"), Split::test, 16, 0.5),
                    Catch::Contains("no documents in this split (1 documents"));
  CHECK(f.make(f.dir.file("one.txt"), Split::train, 16, 0.5)->size() == 1);
  CHECK_THROWS_WITH(f.make(f.dir.file("ten.txt"), Split::train, 16, 1.0),
                    Catch::Contains("val_fraction must be in [0, 1)"));
  CHECK_THROWS_WITH(f.make(f.dir.file("ten.txt"), Split::train, 1, 0.1),
                    Catch::Contains("seq_len must be at least 2"));
}

TEST_CASE("text_docs: a validation file is the held-out split, the data file trains whole", "[text_docs]") {
  Fixture f;
  std::string train_text, val_text;
  for (int i = 0; i < 10; ++i) train_text += "{\"context\": \"" + std::string(size_t(i + 1), 'a') + "\"}\n";
  for (int i = 0; i < 3; ++i) val_text += "{\"context\": \"" + std::string(size_t(2 * i + 11), 'a') + "\"}\n";
  write_text(f.dir.file("train.jsonl"), train_text);
  write_text(f.dir.file("val.jsonl"), val_text);
  auto make = [&](Split split) {
    dpt::DatasetOptions o;
    o.path = f.dir.file("train.jsonl");
    o.val_path = f.dir.file("val.jsonl");
    o.jsonl_field = "context";  // the validation file is read in the data file's format
    o.tokenizer_dir = f.vocab;
    o.seq_len = 16;
    o.val_fraction = 0.25;  // unused with a validation file
    return dpt::make_dataset("text-docs", split, o);
  };
  const auto train = make(Split::train), test = make(Split::test);
  auto doc_length = [](const dpt::Dataset& ds, size_t i) {  // tokens of "a" x n: ceil(n/2)
    return dynamic_cast<const TextDocs&>(ds).document_tokens(i).size();
  };
  REQUIRE(train->size() == 10);  // every document of the data file, in order
  for (size_t i = 0; i < 10; ++i) CHECK(doc_length(*train, i) == (i + 2) / 2);
  REQUIRE(test->size() == 3);  // every document of the validation file, in order: 11, 13, 15 a's
  for (size_t i = 0; i < 3; ++i) CHECK(doc_length(*test, i) == (2 * i + 12) / 2);
}

TEST_CASE("text_docs: JSON lines take one field; errors name the line", "[text_docs]") {
  Fixture f;
  write_text(f.dir.file("squad.jsonl"),
             "{\"id\": 1, \"context\": \"hello world\", \"question\": \"q\"}\n"
             "\n"
             "{\"context\": \"\"}\n"
             "{\"context\": \"aaaa\\nhe\"}\n");
  const auto ds = f.make(f.dir.file("squad.jsonl"), Split::train, 8, 0.0, "context");
  REQUIRE(ds->size() == 2);  // the blank line and the empty field are skipped
  const auto& docs = dynamic_cast<const TextDocs&>(*ds);
  const auto id = dpt::testing::tiny_merge_id;
  CHECK(std::vector<int32_t>(docs.document_tokens(0).begin(), docs.document_tokens(0).end()) ==
        std::vector<int32_t>{id(3), id(8)});
  CHECK(docs.document_tokens(1).size() == 4);  // aa aa \n he

  auto error = [&](const std::string& text, const std::string& field) {
    write_text(f.dir.file("bad.jsonl"), text);
    try {
      f.make(f.dir.file("bad.jsonl"), Split::train, 8, 0.0, field);
    } catch (const dpt::DataError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string good = "{\"context\": \"x\"}\n";
  const std::string file = f.dir.file("bad.jsonl");
  CHECK(error(good + good + "{\"title\": \"x\"}\n", "context") ==
        file + ": line 3: no field \"context\"");
  CHECK(error(good + "{\"context\": 5}\n", "context") ==
        file + ": line 2: field \"context\" is a number, not a string");
  CHECK_THAT(error(good + "{\"context\": \"x\"\n", "context"),
             Catch::StartsWith(file + ": line 2: not valid JSON"));
  CHECK(error("[1]\n", "context") == file + ": line 1: expected a JSON object, got array");
  CHECK(error("{\"context\": \"\"}\n\n", "context") ==
        file + ": no documents (the file is empty or has only empty lines)");
}

TEST_CASE("text_docs: fortune files, empty files, formats", "[text_docs]") {
  Fixture f;
  std::filesystem::create_directory(f.dir.file("fortunes"));
  write_text(f.dir.file("fortunes/b"), "third\n%\n%\nfourth\n");
  write_text(f.dir.file("fortunes/a"), "first line\n\n  second line\n%\nsecond\n%\n");
  write_text(f.dir.file("fortunes/a.dat"), "index");
  const auto docs = dpt::read_documents(f.dir.file("fortunes"), DocFormat::fortunes);
  CHECK(docs == std::vector<std::string>{"first line\n\n  second line", "second", "third", "fourth"});
  // A directory is read as fortunes unless told otherwise; a file as lines.
  CHECK(dpt::parse_doc_format("", f.dir.file("fortunes"), "") == DocFormat::fortunes);
  CHECK(dpt::parse_doc_format("", f.dir.file("fortunes/a"), "") == DocFormat::lines);
  CHECK(dpt::parse_doc_format("", f.dir.file("fortunes/a"), "text") == DocFormat::jsonl);
  CHECK(dpt::read_documents(f.dir.file("fortunes/a"), DocFormat::lines).size() == 5);
  CHECK_THROWS_WITH(dpt::parse_doc_format("csv", "", ""), Catch::Contains("unknown document format 'csv'"));
  CHECK(f.make(f.dir.file("fortunes"), Split::train, 8, 0.0)->size() == 4);

  write_text(f.dir.file("empty.txt"), "");
  CHECK_THROWS_WITH(f.make(f.dir.file("empty.txt"), Split::train, 8, 0.0),
                    f.dir.file("empty.txt") + ": no documents (the file is empty or has only empty lines)");
  write_text(f.dir.file("blank.txt"), "\n\n\r\n");
  CHECK_THROWS_AS(f.make(f.dir.file("blank.txt"), Split::train, 8, 0.0), dpt::DataError);
  CHECK_THROWS_WITH(f.make(f.dir.file("nope.txt"), Split::train, 8, 0.0),
                    Catch::Contains("nope.txt: text corpus not found"));
}

// The default real corpus with GPT-2's vocabulary (fetched by tools/install_deps.sh).
TEST_CASE("text_docs: the fortunes with GPT-2's tokenizer", "[text_docs_fortunes]") {
  INFO("needs GPT-2's vocabulary in " << dpt::tokenizer::default_tokenizer_dir()
                                      << ": run tools/install_deps.sh");
  dpt::DatasetOptions o;  // path empty: the fortunes; tokenizer empty: the default
  o.seq_len = 64;
  const auto train = dpt::make_dataset("text-docs", Split::train, o);
  const auto test = dpt::make_dataset("text-docs", Split::test, o);
  const size_t n = train->size() + test->size();
  // One document per fortune: fortune's own index files (strfile's *.dat, a big-endian
  // header whose second 32-bit word is the number of fortunes) count them independently.
  size_t indexed = 0;
  for (const auto& file : dpt::text_corpus_files(dpt::kFortunesDir)) {
    const std::string dat = dpt::read_file(file + ".dat");
    REQUIRE(dat.size() >= 8);
    size_t count = 0;
    for (int k = 4; k < 8; ++k) count = (count << 8) | uint8_t(dat[size_t(k)]);
    indexed += count;
  }
  CHECK(n == indexed);
  CHECK(n > 10000);
  CHECK(test->size() == size_t(std::floor(double(n) * 0.1)));
  const auto& t = dynamic_cast<const TextDocs&>(*train);
  CHECK(t.vocab_size() == 50257);
  CHECK(t.pad_id() == 50256);
  Batch b;
  t.fill(std::vector<size_t>{0, 1}, b);
  // The first fortune (file "art") starts "7:30, Channel 5: The Bionic Dog".
  dpt::tokenizer::Gpt2Tokenizer tok(dpt::tokenizer::default_tokenizer_dir());
  const std::string first = tok.decode(t.document_tokens(0));
  CHECK(first.starts_with("7:30, Channel 5: The Bionic Dog (Action/Adventure)\n\tThe Bionic"));
  CHECK(dpt::count_targets(b) > 0);
}
