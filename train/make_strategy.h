#pragma once
// The one place that knows every strategy: DDP for stage 0, ZeRO for 1-3.
#include <memory>

#include "parallel/parallel_strategy.h"
#include "parallel/strategy_config.h"

namespace dpt {

// DDP for stage 0, ZeRO for 1-3; std::invalid_argument for anything else.
std::unique_ptr<ParallelStrategy> make_strategy(const StrategyConfig& config, Module& model, Communicator& comm,
                                                const OptimizerFactory& make_optimizer);

}  // namespace dpt
