#pragma once
// train's --strategy diloco and its flags (docs/diloco.md): parsed into
// StrategyConfig::diloco and refused, naming the flag, where they cannot work.
#include <boost/program_options.hpp>

#include "api/trainer/options.h"

namespace train {

void add_diloco_options(boost::program_options::options_description& d, Options& o);
// After notify, with the rest of check_options' values in place.
void check_diloco_options(Options& o, const boost::program_options::variables_map& vm);

}  // namespace train
