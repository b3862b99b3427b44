// tokenize: GPT-2 token ids of each line of a text, or the text of each line of ids.
//   build/bin/tokenize FILE                                        > ids.txt
//   build/bin/tokenize --tokenizer third_party/gpt2 --decode ids.txt > text.txt
// --tokenizer DIR: GPT-2's vocabulary (default: the installed one, as generate, train and
// train_local take it).
// Terms: a *line* is what lies between two '\n' bytes (or the ends of the input); a final
// '\n' ends the last line rather than starting an empty one. A '\r' before the '\n' is
// part of the line's text, as JavaScript's text.split('\n') keeps it, so a file with
// Windows line endings tokenizes its '\r's and decodes back to the same bytes. Each input
// line gives exactly one output line, '\n'-terminated: its ids separated by single spaces
// (an empty line gives an empty line) or, with --decode, its bytes. FILE absent or "-":
// standard input. Ill-formed UTF-8 is replaced by U+FFFD as Node reads a file, unless
// --strict-utf8 makes it an error naming the line and byte.
#include <boost/program_options.hpp>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "data/data_error.h"
#include "data/text/lines.h"
#include "data/files/read_file.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/utf8.h"
#include "api/cli/cli.h"

namespace po = boost::program_options;
using dpt::for_each_line;
using dpt::tokenizer::Gpt2Tokenizer;

namespace {

// Output through one buffer, written out in large blocks.
class Output {
 public:
  std::string& buffer() { return buf_; }
  void maybe_flush() {
    if (buf_.size() >= (size_t(1) << 20)) flush();
  }
  void flush() {
    if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), stdout) != buf_.size()) {
      throw std::runtime_error("cannot write to standard output");
    }
    buf_.clear();
  }

 private:
  std::string buf_;
};

void encode_lines(Gpt2Tokenizer& tok, std::string_view text, const std::string& name,
                  bool strict, Output& out) {
  std::vector<int32_t> ids;
  for_each_line(text, [&](std::string_view line, size_t line_no) {
    if (strict) {
      if (const auto bad = dpt::tokenizer::first_ill_formed(line)) {
        throw dpt::DataError(name + ":" + std::to_string(line_no) + ": ill-formed UTF-8 at byte " +
                             std::to_string(*bad + 1) + " of the line (file offset " +
                             std::to_string(size_t(line.data() - text.data()) + *bad) + ")");
      }
    }
    ids.clear();
    tok.encode(line, ids);
    std::string& buf = out.buffer();
    char num[16];
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) buf.push_back(' ');
      buf.append(num, std::to_chars(num, num + sizeof num, ids[i]).ptr);
    }
    buf.push_back('\n');
    out.maybe_flush();
  });
}

void decode_lines(const Gpt2Tokenizer& tok, std::string_view text, const std::string& name,
                  Output& out) {
  std::vector<int32_t> ids;
  for_each_line(text, [&](std::string_view line, size_t line_no) {
    const std::string where = name + ":" + std::to_string(line_no) + ": ";
    ids.clear();
    size_t pos = 0;
    while (pos < line.size()) {
      if (line[pos] == ' ') {
        ++pos;
        continue;
      }
      const size_t end = std::min(line.find(' ', pos), line.size());
      int32_t id = 0;
      const auto [ptr, ec] = std::from_chars(line.data() + pos, line.data() + end, id);
      if (ec != std::errc() || ptr != line.data() + end) {
        throw dpt::DataError(where + "\"" + std::string(line.substr(pos, end - pos)) +
                             "\" (column " + std::to_string(pos + 1) + ") is not a token id");
      }
      ids.push_back(id);
      pos = end;
    }
    try {
      tok.decode(ids, out.buffer());
    } catch (const std::out_of_range& e) {
      throw dpt::DataError(where + e.what());
    }
    out.buffer().push_back('\n');
    out.maybe_flush();
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = dpt::tokenizer::default_tokenizer_dir(), file;
  bool decode = false, strict = false;
  dpt::tools::Cli cli("tokenize", "tokenize [--tokenizer DIR] [FILE]: GPT-2 token ids of each line of FILE (default: stdin)");
  cli.flags().add_options()
      ("tokenizer", po::value(&dir)->default_value(dir), "directory with vocab.json + merges.txt or encoder.json + vocab.bpe (default: the installed one)")
      ("decode", po::bool_switch(&decode), "read ids (one line of them per line of text), print the text")
      ("strict-utf8", po::bool_switch(&strict), "fail on ill-formed UTF-8 instead of reading it as U+FFFD")
      ("file", po::value(&file), "input file (\"-\" or absent: standard input; also the argument after the flags)");
  cli.positional("file", 1);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  try {
    Gpt2Tokenizer tok(dir);
    std::string text;
    std::string name = file;
    if (file.empty() || file == "-") {
      name = "<stdin>";
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      text = dpt::read_file(file);
    }
    Output out;
    if (decode) {
      decode_lines(tok, text, name, out);
    } else {
      encode_lines(tok, text, name, strict, out);
    }
    out.flush();
    if (std::fflush(stdout) != 0) throw std::runtime_error("cannot write to standard output");
  } catch (const std::exception& e) {
    std::cerr << "tokenize: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
