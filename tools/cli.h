// The one parse/help helper of the programs: flags by exact long name only (no prefix
// guessing: `--save` is not `--save-every`), --help prints and exits 0, an error prints
//   PROG: <message>
//   (see PROG --help)
// and exits 2. A renamed flag keeps working under its old name as a hidden alias that
// prints one line naming the new flag. The flag groups themselves are in *_flags.h.
#pragma once

#include <boost/program_options.hpp>

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

  // Parses argv, reads the config file, notifies, then runs `check` (which throws on a
  // bad value). Returns nothing to go on, or the exit status: 0 after --help, 2 after an
  // error (printed as above).
  std::optional<int> parse(int argc, char** argv,
                           const std::function<void(const boost::program_options::variables_map&)>& check = {}) {
    namespace po = boost::program_options;
    try {
      std::vector<std::string> args = renamed(argc, argv);
      const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
      po::store(po::command_line_parser(args).options(flags_).style(style).run(), vm_);
      if (vm_.count("help")) {
        std::cout << flags_ << "\n";
        return 0;
      }
      if (!config_flag_.empty() && vm_.count(config_flag_)) {
        const auto path = vm_[config_flag_].as<std::string>();
        std::ifstream f(path);
        if (!f) throw std::runtime_error("--" + config_flag_ + ": cannot open '" + path + "'");
        po::store(po::parse_config_file(f, flags_), vm_);
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
  std::vector<std::string> renamed(int argc, char** argv) const {
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--") {  // the rest are values
        for (; i < argc; ++i) args.emplace_back(argv[i]);
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
  boost::program_options::options_description flags_;
  std::vector<std::pair<std::string, std::string>> aliases_;
  std::string config_flag_;
  boost::program_options::variables_map vm_;
};

}  // namespace dpt::tools
