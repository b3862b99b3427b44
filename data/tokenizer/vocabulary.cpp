#include "data/tokenizer/vocabulary.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/data_error.h"
#include "data/files/read_file.h"
#include "data/tokenizer/byte_symbols.h"

namespace dpt::tokenizer {

namespace fs = std::filesystem;

namespace {

std::string hex_code_point(char32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", unsigned(cp));
  return buf;
}

// A token's bytes from its text in a vocabulary file, or an error naming `where`.
std::string token_from_symbols(const std::string& text, const std::string& path,
                               const std::string& where) {
  char32_t bad = 0;
  std::optional<std::string> bytes = symbols_to_bytes(text, &bad);
  if (!bytes) {
    throw_data_error(path, where + ": token \"" + text + "\" has " +
                               (bad == 0xFFFD ? std::string("invalid UTF-8")
                                              : "the character " + hex_code_point(bad)) +
                               ", which is not one of GPT-2's 256 byte symbols");
  }
  return std::move(*bytes);
}

// Splits a merges line at runs of spaces, tabs and carriage returns (JavaScript's
// split(/\s+/) would also drop a Windows line ending).
std::vector<std::string> fields_of(std::string_view line) {
  std::vector<std::string> out;
  size_t i = 0;
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (i < line.size()) {
    while (i < line.size() && blank(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !blank(line[i])) ++i;
    if (i > start) out.emplace_back(line.substr(start, i - start));
  }
  return out;
}

// Reads the token file's {"text": id, ...} without building a JSON document: a SAX
// handler that keeps (text, id) pairs and stops at the first thing that is not one.
struct TokenListReader : nlohmann::json::json_sax_t {
  std::vector<std::pair<std::string, int64_t>> tokens;
  std::string error;  // set when parsing stopped
  std::string current_key;
  int depth = 0;

  bool fail(const std::string& what) {
    error = what;
    return false;
  }
  bool not_an_id(const std::string& what) {
    return depth == 0 ? fail("expected a JSON object mapping token text to id, got " + what)
                      : fail("token \"" + current_key + "\": id " + what + " is not an integer");
  }
  bool number_integer(number_integer_t v) override {
    if (depth != 1) return not_an_id(std::to_string(v));
    tokens.emplace_back(std::move(current_key), v);
    return true;
  }
  bool number_unsigned(number_unsigned_t v) override {
    return number_integer(v > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(v));
  }
  bool null() override { return not_an_id("null"); }
  bool boolean(bool v) override { return not_an_id(v ? "true" : "false"); }
  bool number_float(number_float_t, const string_t& s) override { return not_an_id(s); }
  bool string(string_t& s) override { return not_an_id("\"" + s + "\""); }
  bool binary(binary_t&) override { return not_an_id("binary"); }
  bool start_object(std::size_t) override { return depth++ == 0 || not_an_id("an object"); }
  bool key(string_t& k) override {
    current_key = std::move(k);
    return true;
  }
  bool end_object() override {
    --depth;
    return true;
  }
  bool start_array(std::size_t) override { return not_an_id("an array"); }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return fail(std::string("not valid JSON: ") + e.what());
  }
};

}  // namespace

Vocabulary Vocabulary::load(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw_data_error(dir, "tokenizer directory not found (run tools/install_deps.sh to fetch "
                          "GPT-2's vocabulary into third_party/gpt2)");
  }
  const std::pair<const char*, const char*> layouts[] = {{"vocab.json", "merges.txt"},
                                                         {"encoder.json", "vocab.bpe"}};
  for (const auto& [json_name, merges_name] : layouts) {
    const fs::path json = fs::path(dir) / json_name, merges = fs::path(dir) / merges_name;
    const bool has_json = fs::exists(json, ec), has_merges = fs::exists(merges, ec);
    if (has_json && has_merges) return load_files(json.string(), merges.string());
    if (has_json || has_merges) {
      throw_data_error(dir, std::string("has ") + (has_json ? json_name : merges_name) +
                                " but not " + (has_json ? merges_name : json_name));
    }
  }
  throw_data_error(dir, "no GPT-2 vocabulary: expected vocab.json + merges.txt (Hugging Face) "
                        "or encoder.json + vocab.bpe (OpenAI)");
}

Vocabulary Vocabulary::load_files(const std::string& json_path, const std::string& merges_path) {
  Vocabulary v;
  v.source_ = json_path + " + " + merges_path;
  v.read_tokens(json_path);
  v.read_merges(merges_path);
  return v;
}

void Vocabulary::read_tokens(const std::string& path) {
  TokenListReader reader;
  const bool ok = nlohmann::json::sax_parse(read_file(path), &reader);
  if (!ok || reader.tokens.empty()) {
    throw_data_error(path, reader.error.empty() ? "expected a JSON object mapping token text to id"
                                                : reader.error);
  }
  const size_t n = reader.tokens.size();
  token_bytes_.assign(n, std::string());
  std::vector<bool> seen(n, false);
  for (const auto& [text, id] : reader.tokens) {
    if (id < 0 || id >= int64_t(n)) {
      throw_data_error(path, "token \"" + text + "\": id " + std::to_string(id) +
                                 " is not in 0.." + std::to_string(n - 1) + " (ids must number the " +
                                 std::to_string(n) + " tokens without gaps)");
    }
    if (seen[size_t(id)]) {
      throw_data_error(path, "id " + std::to_string(id) + " is given to two tokens (\"" + text +
                                 "\" and \"" + bytes_to_symbols(token_bytes_[size_t(id)]) + "\")");
    }
    seen[size_t(id)] = true;
    std::string bytes = token_from_symbols(text, path, "id " + std::to_string(id));
    if (bytes.size() == 1) byte_token_[uint8_t(bytes[0])] = int32_t(id);
    if (!ids_.insert(bytes, uint32_t(id))) {
      throw_data_error(path, "token \"" + text + "\" appears twice");
    }
    token_bytes_[size_t(id)] = std::move(bytes);
  }
  for (unsigned b = 0; b < 256; ++b) {
    if (byte_token_[b] < 0) {
      throw_data_error(path, "no token for the byte " + std::to_string(b) + " (symbol \"" +
                                 bytes_to_symbols(std::string(1, char(b))) +
                                 "\"): a byte-level vocabulary needs all 256");
    }
  }
}

void Vocabulary::read_merges(const std::string& path) {
  const std::string text = read_file(path);
  // created_by[id]: rank of the merge that makes token id; single bytes exist from the start.
  std::vector<int32_t> created_by(size(), -1);
  size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (line_no == 1 && line.starts_with("#version")) continue;
    const std::vector<std::string> f = fields_of(line);
    if (f.empty()) continue;
    const std::string where = "line " + std::to_string(line_no);
    if (f.size() != 2) {
      throw_data_error(path, where + ": expected two tokens separated by a space, got " +
                                 std::to_string(f.size()));
    }
    const std::string left = token_from_symbols(f[0], path, where);
    const std::string right = token_from_symbols(f[1], path, where);
    const auto rank = int32_t(merges_.size());
    int32_t ids[2];
    for (int k = 0; k < 2; ++k) {
      const std::optional<int32_t> id = find(k == 0 ? left : right);
      if (!id) throw_data_error(path, where + ": token \"" + f[k] + "\" is not in the vocabulary");
      if (token_bytes_[size_t(*id)].size() > 1 && created_by[size_t(*id)] < 0) {
        throw_data_error(path, where + ": token \"" + f[k] +
                                   "\" is used before any merge creates it");
      }
      ids[k] = *id;
    }
    const std::optional<int32_t> result = find(left + right);
    if (!result) {
      throw_data_error(path, where + ": the merged token \"" + f[0] + f[1] +
                                 "\" is not in the vocabulary");
    }
    if (!merges_.insert(pair_key(ids[0], ids[1]), Merge{rank, *result})) {
      throw_data_error(path, where + ": the merge \"" + f[0] + " " + f[1] + "\" is repeated");
    }
    if (created_by[size_t(*result)] < 0) created_by[size_t(*result)] = rank;
  }
  if (merges_.size() == 0) throw_data_error(path, "no merges");
}

}  // namespace dpt::tokenizer
