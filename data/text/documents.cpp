#include "data/text/documents.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/data_error.h"
#include "data/text/lines.h"
#include "data/files/read_file.h"
#include "data/text/text_corpus.h"

namespace dpt {

namespace {

void add_if_text(std::string_view doc, std::vector<std::string>& out) {
  if (!doc.empty()) out.emplace_back(doc);
}

void read_lines(const std::string& text, std::vector<std::string>& out) {
  for_each_line(text, [&](std::string_view line, size_t) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    add_if_text(line, out);
  });
}

void read_jsonl(const std::string& path, const std::string& text, const std::string& field,
                std::vector<std::string>& out) {
  for_each_line(text, [&](std::string_view line, size_t line_no) {
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;  // blank line
    const std::string where = "line " + std::to_string(line_no) + ": ";
    nlohmann::json obj;
    try {
      obj = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw_data_error(path, where + "not valid JSON: " + e.what());
    }
    if (!obj.is_object()) throw_data_error(path, where + "expected a JSON object, got " + obj.type_name());
    const auto it = obj.find(field);
    if (it == obj.end()) throw_data_error(path, where + "no field \"" + field + "\"");
    if (!it->is_string()) {
      throw_data_error(path, where + "field \"" + field + "\" is a " + it->type_name() +
                                 ", not a string");
    }
    add_if_text(it->get_ref<const std::string&>(), out);
  });
}

void read_fortunes(const std::string& text, std::vector<std::string>& out) {
  std::string doc;
  auto finish = [&] {
    if (!doc.empty() && doc.back() == '\n') doc.pop_back();
    add_if_text(doc, out);
    doc.clear();
  };
  for_each_line(text, [&](std::string_view line, size_t) {
    if (line == "%") {
      finish();
    } else {
      doc.append(line);
      doc.push_back('\n');
    }
  });
  finish();
}

}  // namespace

DocFormat parse_doc_format(std::string_view s, const std::string& path,
                           const std::string& jsonl_field) {
  if (s == "lines") return DocFormat::lines;
  if (s == "jsonl") return DocFormat::jsonl;
  if (s == "fortunes") return DocFormat::fortunes;
  if (!s.empty()) {
    throw std::invalid_argument("unknown document format '" + std::string(s) +
                                "' (valid: lines, jsonl, fortunes)");
  }
  if (!jsonl_field.empty()) return DocFormat::jsonl;
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) ? DocFormat::fortunes : DocFormat::lines;
}

std::vector<std::string> read_documents(const std::string& path, DocFormat format,
                                        const std::string& jsonl_field) {
  if (format == DocFormat::jsonl && jsonl_field.empty()) {
    throw std::invalid_argument("the jsonl document format needs a field name");
  }
  std::vector<std::string> docs;
  for (const std::string& file : text_corpus_files(path)) {
    const std::string text = read_file(file);
    switch (format) {
      case DocFormat::lines: read_lines(text, docs); break;
      case DocFormat::jsonl: read_jsonl(file, text, jsonl_field, docs); break;
      case DocFormat::fortunes: read_fortunes(text, docs); break;
    }
  }
  if (docs.empty()) throw_data_error(path, "no documents (the file is empty or has only empty lines)");
  return docs;
}

}  // namespace dpt
