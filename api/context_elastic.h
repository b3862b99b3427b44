// The elastic side of dpt::Context (InitOptions::elastic under launch --elastic): the
// step a wrapper's elastic loop takes when its communicator failed (dpt::torch::ElasticLoop,
// bindings/libtorch/elastic.cpp). It is train --elastic's re-forming (DistTrainer::reform,
// train/dist_trainer_elastic.cpp) without the trainer's state: the same store protocol
// (comm/store/elastic_membership.h) and the same communicator builder (elastic_setup.h).
#pragma once

#include <string>

#include "api/context_impl.h"
#include "comm/store/elastic_membership.h"

namespace dpt {

// Aborts the context's communicator (peers blocked on this rank fail at once instead of
// waiting out their timeout), arrives in the next generation, and installs that
// generation's communicator as the context's (the failed one is retired: work still
// referring to it may be drained). A generation whose communicator fails to build (a
// member died as it formed) is followed by the next. Throws ElasticError when fewer than
// the launcher's minimum are left or this process was excluded (presumed lost while it
// hung), ElasticFinishedWithout when the others finished without it; std::logic_error when
// the context is not elastic (`who` names the caller).
const Membership& next_generation(Context::Impl& ctx, const std::string& why, const std::string& who);

// The membership the context is in (std::logic_error naming `who` when not elastic).
const Membership& membership(const Context::Impl& ctx, const std::string& who);

// The members finished: a newcomer still waiting gives up cleanly.
void mark_elastic_done(Context::Impl& ctx);

}  // namespace dpt
