// zero_consolidate: turns a ZeRO checkpoint's per-rank optimizer shards into the single
// optimizer file a DDP checkpoint has, beside the (already consolidated) model file.
//   build/bin/zero_consolidate <checkpoint dir>     (follows <dir>/latest)
//   build/bin/zero_consolidate <dir>/step_N
// Afterwards the step holds model.safetensors + model.optim.safetensors with plain names
// (exp_avg, exp_avg_sq, ...; element i belongs to flat parameter element i), exactly as
// DDP writes them; a run of any world size (ZeRO or not) resumes from it.
#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "models/io/checkpoint.h"
#include "parallel/optimizer_shards.h"
#include "api/cli/cli.h"

namespace fs = std::filesystem;
namespace po = boost::program_options;

int main(int argc, char** argv) {
  std::string where;
  dpt::tools::Cli cli("zero_consolidate", "flags");
  cli.help_text(
      "usage: zero_consolidate <checkpoint dir | checkpoint dir/step_N>\n"
      "Writes the single optimizer file of a DDP checkpoint (model.optim.safetensors) from a ZeRO\n"
      "checkpoint's per-rank shards, beside its model file; a checkpoint dir means its latest step.");
  cli.hidden().add_options()("checkpoint", po::value(&where), "the checkpoint folder or step folder");
  cli.positional("checkpoint", 1);
  const auto rc = cli.parse(argc, argv, [&](const po::variables_map&) {
    if (where.empty()) throw std::invalid_argument("name the checkpoint: zero_consolidate <checkpoint dir | checkpoint dir/step_N>");
  });
  if (rc) return *rc;
  try {
    fs::path dir = where;
    if (fs::exists(dir / "latest")) {
      std::ifstream f(dir / "latest");
      std::string name;
      if (!(f >> name)) throw std::runtime_error("cannot read " + (dir / "latest").string());
      dir /= name;
    }
    const std::string model_path = (dir / "model.safetensors").string();
    if (!fs::exists(model_path)) throw std::runtime_error(model_path + " does not exist (not a checkpoint step folder?)");
    const auto model = dpt::load_safetensors(model_path);  // validates the model file too
    const std::string out = dpt::consolidate_optimizer_state(model_path);
    const auto st = dpt::load_safetensors(out);
    std::printf("zero_consolidate: %s: model %zu tensors; optimizer '%s' step %s, %zu state tensors of %zu elements -> %s\n",
                dir.string().c_str(), model.tensors.size(), st.metadata.at("optimizer").c_str(), st.metadata.at("step_count").c_str(),
                st.tensors.size(), st.tensors.empty() ? size_t(0) : st.tensors.front().data.size(), out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zero_consolidate: %s\n", e.what());
    return 1;
  }
}
