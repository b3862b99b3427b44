#include "train/make_strategy.h"

#include <stdexcept>
#include <string>

#include "parallel/ddp/ddp_strategy.h"
#include "parallel/diloco/diloco_strategy.h"
#include "parallel/zero/zero_strategy.h"

namespace dpt {

std::unique_ptr<ParallelStrategy> make_strategy(const StrategyConfig& config, Module& model, Communicator& comm,
                                                const OptimizerFactory& make_optimizer) {
  if (config.precision != DType::f32 && config.precision != DType::bf16 && config.precision != DType::f16)
    throw std::invalid_argument(std::string("--precision ") + dtype_name(config.precision) + ": valid are fp32, bf16, fp16");
  if (config.diloco.inner_steps > 0) return std::make_unique<DilocoStrategy>(model, comm, config, make_optimizer);
  if (config.zero_stage == 0) return std::make_unique<DdpStrategy>(model, comm, config, make_optimizer);
  if (config.zero_stage >= 1 && config.zero_stage <= 3)
    return std::make_unique<ZeroStrategy>(model, comm, config, make_optimizer);
  throw std::invalid_argument("--zero " + std::to_string(config.zero_stage) + ": valid stages are 0, 1, 2, 3");
}

}  // namespace dpt
