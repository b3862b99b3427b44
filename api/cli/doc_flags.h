// The document-data flags shared by train_local and train (--dataset text-docs, the
// tutorials' way): --data-file FILE names the documents file (the same as the data
// path flag given a file), --jsonl-field NAME takes that field of each JSON line (as
// the tutorials take SQuAD's `context`), --tokenizer DIR the GPT-2 vocabulary to tokenize
// them with (default: the installed one, as tokenize and generate). The held-out
// documents: --val-fraction F of the file's, spread over it (data/text/text_docs.h: document i
// when floor((i+1)F) > floor(iF); default 0.1, every 10th), or --val-file FILE's, all of
// them, in the data file's format, the data file then training whole.
#pragma once

#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace dpt::tools {

struct DocFlags {
  std::string data_file, jsonl_field, tokenizer_dir, val_file;
  double val_fraction = 0.1;  // read only when given (apply_val_flags)
};

inline void add_doc_options(boost::program_options::options_description& d, DocFlags& f) {
  namespace po = boost::program_options;
  d.add_options()
    ("data-file", po::value(&f.data_file)->default_value(""), "text-docs: the documents file, one per line (or JSON lines with --jsonl-field); text: the file read as bytes. Image datasets read --data-dir instead")
    ("jsonl-field", po::value(&f.jsonl_field)->default_value(""), "text-docs: each line is a JSON object and the document is this field")
    ("tokenizer", po::value(&f.tokenizer_dir)->default_value(""), "text-docs: directory of GPT-2's vocabulary (encoder.json + vocab.bpe, or vocab.json + merges.txt); default: the installed one")
    ("val-fraction", po::value(&f.val_fraction), "text-docs: share of the documents held out for evaluation, 0 < F < 1, spread evenly over the file (document i when floor((i+1)F) > floor(iF)); default 0.1, every 10th")
    ("val-file", po::value(&f.val_file)->default_value(""), "text-docs: evaluate on every document of this file (the --data-file's format) and train on the whole --data-file");
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

// Call after notify, with the dataset chosen (empty: the model's default): the held-out
// flags apply to text-docs only, the fraction strictly between 0 and 1, the file must
// exist, and the two exclude each other.
inline void apply_val_flags(const DocFlags& f, const boost::program_options::variables_map& vm,
                            const std::string& dataset, double& val_fraction, std::string& val_file) {
  const bool fraction = vm.count("val-fraction") > 0, file = !f.val_file.empty();
  if ((fraction || file) && dataset != "text-docs")
    throw std::invalid_argument(std::string(fraction ? "--val-fraction" : "--val-file") +
                                " applies to --dataset text-docs only, not " +
                                (dataset.empty() ? std::string("the model's default dataset") : "'" + dataset + "'"));
  if (fraction && file)
    throw std::invalid_argument("give --val-fraction or --val-file, not both: --val-file '" + f.val_file +
                                "' holds out that file's documents and trains on the whole data file");
  if (fraction) {
    if (!(f.val_fraction > 0 && f.val_fraction < 1)) {
      char given[32];
      std::snprintf(given, sizeof given, "%g", f.val_fraction);
      throw std::invalid_argument(std::string("--val-fraction ") + given +
                                  ": must be between 0 and 1, exclusive (the share of the documents held out; "
                                  "default 0.1)");
    }
    val_fraction = f.val_fraction;
  }
  if (file) {
    if (!std::filesystem::is_regular_file(f.val_file))
      throw std::invalid_argument("--val-file '" + f.val_file + "': no such file (the held-out documents, in the "
                                  "data file's format)");
    val_file = f.val_file;
  }
}

}  // namespace dpt::tools
