// llmc_data: a text corpus as llm.c's token files (github.com/karpathy/llm.c), tokenized
// with our GPT-2 tokenizer, so that llm.c's train_gpt2cu trains on the same tokens as our
// GPT-2 (the "llm.c anchor", docs/gpu.md).
//   build/bin/llmc_data --out build/llmc/fortunes          # the fortunes, train and val
//   build/bin/llmc_data --input docs.txt --format lines --out /tmp/docs
// writes OUT_train.bin and OUT_val.bin. The format is llm.c's GPT-2 data file (facts from
// its dev/data/data_common.py and llmc/dataloader.h): a header of 256 little-endian int32
// (magic 20240520, version 1, the token count, the rest 0), then the tokens as uint16.
// As llm.c's own data scripts do, each document is preceded by <|endoftext|> (50256), so
// the file starts with it. The documents are read as train's text-docs reads them
// (data/text/documents.h: the fortunes directory by default) and split by the same rule:
// document i (0-based, file order) is validation when floor((i+1) f) > floor(i f).
#include <boost/program_options.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "data/data_error.h"
#include "data/text/documents.h"
#include "data/text/text_corpus.h"
#include "data/tokenizer/tokenizer.h"
#include "device/safe_file.h"
#include "api/cli/cli.h"

namespace po = boost::program_options;
using dpt::tokenizer::Gpt2Tokenizer;

namespace {

constexpr int32_t kMagic = 20240520;  // llm.c's GPT-2 token file (uint16 tokens)
constexpr int32_t kVersion = 1;
constexpr size_t kHeaderInts = 256;

struct Split {
  const char* name;
  std::vector<uint16_t> tokens;
  size_t documents = 0;
};

// Appends <|endoftext|> and the document's ids; refuses an id that uint16 cannot hold
// (a vocabulary larger than GPT-2's: llm.c's uint16 format has no room for it).
void append_document(Gpt2Tokenizer& tok, int32_t eot, const std::string& doc, size_t doc_index,
                     std::vector<int32_t>& scratch, Split& split) {
  scratch.clear();
  scratch.push_back(eot);
  tok.encode(doc, scratch);
  for (const int32_t id : scratch) {
    if (id < 0 || id > std::numeric_limits<uint16_t>::max()) {
      throw dpt::DataError("document " + std::to_string(doc_index) + " has token id " +
                           std::to_string(id) + ", above 65535: llm.c's GPT-2 format stores " +
                           "uint16 tokens; use a vocabulary of at most 65536 tokens (GPT-2's has 50257)");
    }
    split.tokens.push_back(uint16_t(id));
  }
  ++split.documents;
}

// Writes through a temporary name, so an interrupted run never leaves a file that looks
// complete.
void write_bin(const std::string& path, const std::vector<uint16_t>& tokens) {
  if (tokens.size() > size_t(std::numeric_limits<int32_t>::max())) {
    throw dpt::DataError(path + ": " + std::to_string(tokens.size()) +
                         " tokens do not fit the header's int32 count; use a smaller corpus");
  }
  std::array<int32_t, kHeaderInts> header{};
  header[0] = kMagic;
  header[1] = kVersion;
  header[2] = int32_t(tokens.size());
  // Token data is meant to be shared: the umask's mode, as before (device/safe_file.h).
  try {
    dpt::AtomicFile out(path, dpt::FileAccess::umask);
    // The header and tokens are written in this machine's byte order: llm.c reads them
    // with fread on little-endian machines, and so do we (x86-64, aarch64).
    static_assert(std::endian::native == std::endian::little, "llm.c's files are little-endian");
    out.write(header.data(), sizeof(header));
    out.write(tokens.data(), tokens.size() * sizeof(uint16_t));
    out.commit();
  } catch (const dpt::FileWriteError& e) {
    throw dpt::DataError(path + ": " + e.reason() + " (does its directory exist and is it writable? disk full?)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string input = dpt::kFortunesDir, format, jsonl_field, dir = dpt::tokenizer::default_tokenizer_dir(), out;
  double val_fraction = 0.1;
  size_t min_tokens = 1;
  dpt::tools::Cli cli("llmc_data", "llmc_data --out PREFIX [flags]: PREFIX_train.bin and PREFIX_val.bin in llm.c's GPT-2 token format");
  cli.flags().add_options()
      ("out", po::value(&out), "output prefix: writes PREFIX_train.bin and PREFIX_val.bin (required)")
      ("input", po::value(&input)->default_value(input), "text file or directory of documents (default: the fortunes)")
      ("format", po::value(&format), "lines | jsonl | fortunes (default: fortunes for a directory, else lines)")
      ("jsonl-field", po::value(&jsonl_field), "with --format jsonl: the string field holding each document")
      ("tokenizer", po::value(&dir)->default_value(dir), "directory with vocab.json + merges.txt or encoder.json + vocab.bpe")
      ("val-fraction", po::value(&val_fraction)->default_value(val_fraction), "share of documents held out for validation, in (0, 1)")
      ("min-tokens", po::value(&min_tokens)->default_value(min_tokens),
       "refuse a split with fewer tokens (llm.c needs B*T+1 per file: 16385 for B=16 T=1024)");
  if (auto rc = cli.parse(argc, argv, [&](const po::variables_map&) {
        if (out.empty()) throw std::invalid_argument("--out PREFIX is required (e.g. --out build/llmc/fortunes)");
        if (!(val_fraction > 0 && val_fraction < 1)) {
          std::ostringstream msg;
          msg << "--val-fraction " << val_fraction << " is outside (0, 1): llm.c needs both a train and a val file";
          throw std::invalid_argument(msg.str());
        }
      })) {
    return *rc;
  }
  try {
    const auto doc_format = dpt::parse_doc_format(format, input, jsonl_field);
    const std::vector<std::string> docs = dpt::read_documents(input, doc_format, jsonl_field);
    Gpt2Tokenizer tok(dir);
    const int32_t eot = tok.end_of_text();
    Split train{"train", {}}, val{"val", {}};
    std::vector<int32_t> scratch;
    for (size_t i = 0; i < docs.size(); ++i) {
      const bool held_out = std::floor(double(i + 1) * val_fraction) > std::floor(double(i) * val_fraction);
      append_document(tok, eot, docs[i], i, scratch, held_out ? val : train);
    }
    for (const Split* s : {&train, &val}) {
      if (s->tokens.size() < min_tokens) {
        throw dpt::DataError(input + ": the " + s->name + " split has " + std::to_string(s->tokens.size()) +
                             " tokens (" + std::to_string(s->documents) + " of " + std::to_string(docs.size()) +
                             " documents), fewer than --min-tokens " + std::to_string(min_tokens) +
                             "; use a larger corpus or change --val-fraction");
      }
    }
    for (const Split* s : {&train, &val}) {
      const std::string path = out + "_" + s->name + ".bin";
      write_bin(path, s->tokens);
      std::cout << "llmc_data: " << path << ": " << s->tokens.size() << " tokens, " << s->documents
                << " documents\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "llmc_data: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
