#include "comm/launch/slurm_lists.h"

#include <cctype>
#include <charconv>
#include <stdexcept>

#include <fmt/format.h>

namespace dpt::slurm {
namespace {

constexpr size_t kMaxEntries = size_t{1} << 20;  // far beyond any job; stops "n[0-99999999]"

[[noreturn]] void bad(const char* var, std::string_view text, const std::string& why) {
  throw std::invalid_argument(fmt::format("launch variable {}='{}' is malformed: {}", var, text, why));
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// A non-negative decimal that fits in `long long`, else an error naming `what`.
long long number(std::string_view s, const char* var, std::string_view text, const char* what) {
  long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (!all_digits(s) || ec != std::errc() || end != s.data() + s.size())
    bad(var, text, fmt::format("{} '{}' is not a number", what, s));
  return v;
}

// Splits at commas outside brackets.
std::vector<std::string_view> split_top(std::string_view s, const char* var, std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || (s[i] == ',' && depth == 0)) {
      if (i == start) bad(var, text, "an empty entry between commas");
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    } else if (s[i] == '[') {
      if (++depth > 1) bad(var, text, "a bracket inside a bracket");
    } else if (s[i] == ']') {
      if (--depth < 0) bad(var, text, "a ']' without its '['");
    }
  }
  if (depth != 0) bad(var, text, "a '[' without its ']'");
  return out;
}

// Appends every name `pattern` stands for (brackets expanded left to right).
void expand_name(std::string_view pattern, const std::string& head, std::vector<std::string>& out, const char* var,
                 std::string_view text) {
  const size_t open = pattern.find('[');
  if (open == std::string_view::npos) {
    if (out.size() >= kMaxEntries) bad(var, text, fmt::format("more than {} hosts", kMaxEntries));
    out.push_back(head + std::string(pattern));
    return;
  }
  const size_t close = pattern.find(']', open);  // split_top checked that it exists
  const std::string prefix = head + std::string(pattern.substr(0, open));
  const std::string_view body = pattern.substr(open + 1, close - open - 1), rest = pattern.substr(close + 1);
  if (body.empty()) bad(var, text, "empty brackets");
  size_t start = 0;
  for (size_t i = 0; i <= body.size(); ++i) {
    if (i < body.size() && body[i] != ',') continue;
    const std::string_view item = body.substr(start, i - start);
    start = i + 1;
    if (item.empty()) bad(var, text, "an empty entry inside brackets");
    const size_t dash = item.find('-');
    const std::string_view lo_text = item.substr(0, dash);
    const std::string_view hi_text = dash == std::string_view::npos ? lo_text : item.substr(dash + 1);
    const long long lo = number(lo_text, var, text, "host number"), hi = number(hi_text, var, text, "host number");
    if (lo > hi) bad(var, text, fmt::format("the range '{}' runs backwards", item));
    if (static_cast<unsigned long long>(hi - lo) >= kMaxEntries)
      bad(var, text, fmt::format("the range '{}' holds more than {} hosts", item, kMaxEntries));
    // Zero padding: every number is as wide as the range's first one ("01-10": 01..10).
    for (long long v = lo; v <= hi; ++v)
      expand_name(rest, prefix + fmt::format("{:0{}}", v, lo_text.size()), out, var, text);
  }
}

}  // namespace

std::vector<int> expand_tasks_per_node(std::string_view text, const char* var) {
  std::vector<int> out;
  for (std::string_view item : split_top(text, var, text)) {
    std::string_view count = item;
    long long repeat = 1;
    if (const size_t paren = item.find('('); paren != std::string_view::npos) {
      const std::string_view times = item.substr(paren);
      if (times.size() < 4 || times.substr(0, 2) != "(x" || times.back() != ')')
        bad(var, text, fmt::format("'{}' is neither N nor N(xM)", item));
      count = item.substr(0, paren);
      repeat = number(times.substr(2, times.size() - 3), var, text, "node count");
      if (repeat < 1) bad(var, text, fmt::format("'{}' repeats a count for no node", item));
    }
    const long long n = number(count, var, text, "task count");
    if (n < 1 || n > (1 << 20)) bad(var, text, fmt::format("task count {} is not in [1, {}]", n, 1 << 20));
    if (out.size() + static_cast<size_t>(repeat) > kMaxEntries)
      bad(var, text, fmt::format("more than {} nodes", kMaxEntries));
    out.insert(out.end(), static_cast<size_t>(repeat), static_cast<int>(n));
  }
  return out;
}

std::vector<std::string> expand_host_list(std::string_view text, const char* var) {
  std::vector<std::string> out;
  for (std::string_view name : split_top(text, var, text)) expand_name(name, "", out, var, text);
  return out;
}

}  // namespace dpt::slurm
