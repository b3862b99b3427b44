// The one parse/help helper of the programs: flags by exact long name only (no prefix
// guessing: `--save` is not `--save-every`), --help prints and exits 0, an error prints
//   PROG: <message>
//   (see PROG --help)
// and exits 2. A renamed flag keeps working under its old name as a hidden alias that
// prints one line naming the new flag. A word that is not a flag's value is refused unless
// the program declares positional arguments (tokenize's FILE), or takes everything from
// its first such word on as a command to pass through untouched (launch's program and its
// arguments: take_rest). The flag groups themselves are in *_flags.h.
#pragma once

#include <boost/program_options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dpt::tools {

class Cli {
 public:
  Cli(std::string program, const std::string& caption) : program_(std::move(program)), flags_(caption) {
    flags_.add_options()("help,h", "show this help");
  }
  boost::program_options::options_description& flags() { return flags_; }
  // --old_name is read as --new_name, with a one-line note on stderr; not in --help.
  void alias(std::string old_name, std::string new_name) { aliases_.emplace_back(std::move(old_name), std::move(new_name)); }
  // --flag FILE names a file of `key = value` lines, read after the command line.
  void config_file_flag(std::string flag) { config_flag_ = std::move(flag); }
  // Up to max_count (-1: any number) words that are not flags are values of the flag
  // `name` (declared in flags() or hidden()), in order.
  void positional(const std::string& name, int max_count) { positional_.add(name.c_str(), max_count); }
  // launch's way: the first word that is neither a flag nor a flag's value (or the word
  // after "--") starts a command that is passed through untouched, flags included: rest().
  void take_rest() { take_rest_ = true; }
  const std::vector<std::string>& rest() const { return rest_; }
  // The argument `token`, exactly, is read as --flag, silently (mpirun's -np for launch's
  // --nproc): another spelling, not a renaming.
  void spelling(std::string token, std::string flag) { spellings_.emplace_back(std::move(token), std::move(flag)); }
  // Flags parsed but not listed by --help (the declaration of a positional argument).
  boost::program_options::options_description& hidden() { return hidden_; }
  // --help prints `before` (usage lines), the flags, then `after` (notes).
  void help_text(std::string before, std::string after = "") {
    help_before_ = std::move(before);
    help_after_ = std::move(after);
  }

  // Parses argv, reads the config file, notifies, then runs `check` (which throws on a
  // bad value). Returns nothing to go on, or the exit status: 0 after --help, 2 after an
  // error (printed as above).
  std::optional<int> parse(int argc, char** argv,
                           const std::function<void(const boost::program_options::variables_map&)>& check = {}) {
    namespace po = boost::program_options;
    try {
      po::options_description all;
      all.add(flags_).add(hidden_);
      std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
      if (take_rest_) rest_ = split_rest(args, all);  // before renaming: the rest is not ours
      args = renamed(args);
      const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
      try {
        po::store(po::command_line_parser(args).options(all).style(style).positional(positional_).run(), vm_);
      } catch (const po::too_many_positional_options_error&) {
        // Parsed again without the positional names, to name the words that are too many.
        std::vector<std::string> words;
        for (const auto& opt : po::command_line_parser(args).options(all).style(style).run().options)
          if (opt.position_key >= 0 && !opt.original_tokens.empty()) words.push_back(opt.original_tokens.front());
        throw std::invalid_argument(stray_words_message(words));
      }
      if (vm_.count("help")) {
        if (!help_before_.empty()) std::cout << help_before_ << "\n";
        std::cout << flags_ << "\n";
        if (!help_after_.empty()) std::cout << help_after_ << "\n";
        return 0;
      }
      if (!config_flag_.empty() && vm_.count(config_flag_)) {
        const auto path = vm_[config_flag_].as<std::string>();
        std::ifstream f(path);
        if (!f) throw std::runtime_error("--" + config_flag_ + ": cannot open '" + path + "'");
        po::store(po::parse_config_file(f, all), vm_);
      }
      po::notify(vm_);
      if (check) check(vm_);
    } catch (const std::exception& e) {
      std::cerr << program_ << ": " << e.what() << "\n(see " << program_ << " --help)\n";
      return 2;
    }
    return std::nullopt;
  }
  const boost::program_options::variables_map& values() const { return vm_; }

 private:
  static bool is_word(const std::string& token) { return token.empty() || token[0] != '-' || token == "-"; }

  // take_rest(): cuts `args` at the first word that no flag before it takes as its value
  // (--flag VALUE, -f VALUE; not --flag=VALUE or -fVALUE), or after "--", and returns the
  // rest. A flag Boost does not know is left for it to report.
  std::vector<std::string> split_rest(std::vector<std::string>& args,
                                      const boost::program_options::options_description& all) const {
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a == "--" || is_word(a)) {
        std::vector<std::string> rest(args.begin() + std::ptrdiff_t(i) + (a == "--"), args.end());
        args.resize(i);
        return rest;
      }
      std::string name;
      bool inline_value = false;
      if (a.rfind("--", 0) == 0) {
        const size_t eq = a.find('=');
        name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
        inline_value = eq != std::string::npos;
      } else {
        name = a.substr(0, 2);  // "-n"; "-n4" carries its value
        inline_value = a.size() > 2;
      }
      for (const auto& [token, flag] : spellings_)
        if (a == token) name = flag, inline_value = false;
      const auto* d = all.find_nothrow(name, false);
      if (d && !inline_value && d->semantic()->max_tokens() > 0) ++i;  // its value, whatever it looks like
    }
    return {};
  }

  std::string stray_words_message(const std::vector<std::string>& words) const {
    const unsigned n = positional_.max_total_count();
    std::string extra;
    for (size_t i = n; i < words.size(); ++i) extra += (extra.empty() ? "'" : ", '") + words[i] + "'";
    if (n == 0)
      return "unexpected argument " + extra + ": " + program_ +
             " takes no arguments besides its flags (a word without -- in front, or a value after a flag that takes "
             "none?)";
    return "unexpected argument " + extra + ": " + program_ + " takes at most " + std::to_string(n) +
           " besides its flags (" + positional_.name_for_position(0) + ")";
  }

  std::vector<std::string> renamed(const std::vector<std::string>& given) const {
    std::vector<std::string> args;
    for (size_t i = 0; i < given.size(); ++i) {
      std::string a = given[i];
      for (const auto& [token, flag] : spellings_)
        if (a == token) a = "--" + flag;
      if (a == "--") {  // the rest are values
        for (; i < given.size(); ++i) args.push_back(given[i]);
        break;
      }
      for (const auto& [old_name, new_name] : aliases_) {
        const std::string flag = "--" + old_name;
        if (a == flag || a.rfind(flag + "=", 0) == 0) {
          std::fprintf(stderr, "%s: --%s is deprecated, use --%s\n", program_.c_str(), old_name.c_str(), new_name.c_str());
          a = "--" + new_name + a.substr(flag.size());
        }
      }
      args.push_back(std::move(a));
    }
    return args;
  }

  std::string program_;
  boost::program_options::options_description flags_, hidden_;
  boost::program_options::positional_options_description positional_;
  std::vector<std::pair<std::string, std::string>> aliases_, spellings_;
  std::string config_flag_, help_before_, help_after_;
  bool take_rest_ = false;
  std::vector<std::string> rest_;
  boost::program_options::variables_map vm_;
};

}  // namespace dpt::tools
