#pragma once
// Reading documents for language-model fine-tuning. Terms: a *document* is one training
// text, tokenized and trained on by itself (text_docs.h). Formats:
//   lines:    one document per line of the file. Lines end at '\n'; a '\r' just before it
//             is dropped (Windows line endings are not part of the text).
//   jsonl:    one JSON object per line; the document is its string field `jsonl_field`
//             (as the tutorials take SQuAD's "context"). A line that is not a JSON object,
//             lacks the field, or has a non-string there is an error naming the line.
//   fortunes: fortune(6)'s files: documents separated by lines holding only "%"; a
//             document keeps its inner line breaks, not its final one.
// In every format, documents with no text (empty lines, empty fields, nothing between two
// "%") are skipped. A directory is read as its files in name order, skipping what
// text_corpus.h skips (hidden files, symlinks, fortune's *.dat and *.u8).
#include <string>
#include <string_view>
#include <vector>

namespace dpt {

enum class DocFormat { lines, jsonl, fortunes };

// "lines" | "jsonl" | "fortunes"; std::invalid_argument otherwise. "" (auto) means jsonl
// when `jsonl_field` is set, fortunes when `path` is a directory, lines otherwise.
DocFormat parse_doc_format(std::string_view s, const std::string& path,
                           const std::string& jsonl_field);

// The documents of `path` in file order. Throws DataError naming the file (and line) of a
// problem, including a path with no document at all.
std::vector<std::string> read_documents(const std::string& path, DocFormat format,
                                        const std::string& jsonl_field = "");

}  // namespace dpt
