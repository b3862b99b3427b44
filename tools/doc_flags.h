// The document-data flags shared by train_local and train (--dataset text-docs, the
// tutorials' way): --data-file FILE names the documents file (the same as the data
// path flag given a file), --jsonl-field NAME takes that field of each JSON line (as
// the tutorials take SQuAD's `context`), --tokenizer DIR the GPT-2 vocabulary to tokenize
// them with (default: the installed one, as tokenize and generate).
#pragma once

#include <boost/program_options.hpp>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace dpt::tools {

struct DocFlags {
  std::string data_file, jsonl_field, tokenizer_dir;
};

inline void add_doc_options(boost::program_options::options_description& d, DocFlags& f) {
  namespace po = boost::program_options;
  d.add_options()
    ("data-file", po::value(&f.data_file)->default_value(""), "text-docs: the documents file, one per line (or JSON lines with --jsonl-field)")
    ("jsonl-field", po::value(&f.jsonl_field)->default_value(""), "text-docs: each line is a JSON object and the document is this field")
    ("tokenizer", po::value(&f.tokenizer_dir)->default_value(""), "text-docs: directory of GPT-2's vocabulary (encoder.json + vocab.bpe, or vocab.json + merges.txt); default: the installed one");
}

// --tokenizer names a directory that must exist: refused before any rendezvous or data.
inline void check_tokenizer_dir(const std::string& dir) {
  if (!dir.empty() && !std::filesystem::is_directory(dir))
    throw std::invalid_argument("--tokenizer '" + dir + "': no such directory (GPT-2's vocabulary: encoder.json + "
                                "vocab.bpe, or vocab.json + merges.txt)");
}

// Call after notify: --data-file goes into the data path (`path_flag` names that flag
// in the error when both are given).
inline void apply_doc_flags(const DocFlags& f, std::string& data_path, std::string& jsonl_field, const char* path_flag) {
  if (!f.data_file.empty()) {
    if (!data_path.empty())
      throw std::invalid_argument(std::string("give --data-file or ") + path_flag + ", not both (--data-file '" +
                                  f.data_file + "', " + path_flag + " '" + data_path + "')");
    data_path = f.data_file;
  }
  jsonl_field = f.jsonl_field;
}

}  // namespace dpt::tools
