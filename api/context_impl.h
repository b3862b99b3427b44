// dpt::Context's state (dpt/init.h): the communicator in use, those a backend switch
// retired (kept alive: a wrapper's strategy may still hold a pointer until it moved), the
// launch, the wrappers to move at a switch, and under launch --elastic the job's
// membership (api/context_elastic.h re-forms it).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/launch/launch_env.h"
#include "dpt/init.h"

namespace dpt {
class ParallelStrategy;
}
namespace train {
struct ElasticSetup;
}

struct dpt::Context::Impl {
  // A wrapper over this context: its strategy and the name it goes by in errors.
  struct Wrapper {
    std::string name;
    ::dpt::ParallelStrategy* strategy = nullptr;  // null: the wrapper reads `comm` at each use
    const bool* in_backward = nullptr;  // a forward waits for its backward
  };
  std::unique_ptr<::dpt::Communicator> comm;
  std::vector<std::unique_ptr<::dpt::Communicator>> retired;
  ::dpt::CommOptions options;
  ::dpt::LaunchInfo launch;
  std::string threads;
  std::vector<Wrapper*> wrappers;
  std::shared_ptr<::train::ElasticSetup> elastic;  // null: a fixed-size world
};
