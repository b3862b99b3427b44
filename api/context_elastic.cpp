#include "api/context_elastic.h"

#include <stdexcept>

#include "api/trainer/elastic_setup.h"

namespace dpt {

namespace {
train::ElasticSetup& elastic_of(const Context::Impl& ctx, const std::string& who) {
  if (!ctx.elastic)
    throw std::logic_error(who + ": the context is not elastic; make it with dpt::init(argc, argv, {.elastic = true}) "
                                 "(or pass --elastic) and start the program with build/bin/launch --elastic -n MIN:MAX");
  return *ctx.elastic;
}
}  // namespace

const Membership& membership(const Context::Impl& ctx, const std::string& who) { return elastic_of(ctx, who).membership; }

const Membership& next_generation(Context::Impl& ctx, const std::string& why, const std::string& who) {
  train::ElasticSetup& e = elastic_of(ctx, who);
  ctx.comm->abort("elastic: leaving generation " + std::to_string(e.membership.generation) + ": " + why);
  Membership m = e.membership;
  for (;;) {
    m = e.rendezvous->form(m.generation + 1, m.rank);
    if (m.excluded()) {
      const std::string what = "excluded from generation " + std::to_string(m.generation) +
                               ": the group re-formed without this process (" + e.rendezvous->id() +
                               "), which it presumed lost";
      if (e.rendezvous->done()) throw ElasticFinishedWithout("elastic: the job finished without this process (" + what + ")");
      throw ElasticError("elastic: " + what);
    }
    try {
      std::unique_ptr<Communicator> next = e.make_comm(m);
      ctx.retired.push_back(std::move(ctx.comm));
      ctx.comm = std::move(next);
      e.membership = m;
      return e.membership;
    } catch (const CommError& err) {
      // A member died or stopped while this generation built its communicator: the next.
      if (dynamic_cast<const UsageError*>(&err) || dynamic_cast<const MismatchError*>(&err)) throw;
    }
  }
}

void mark_elastic_done(Context::Impl& ctx) {
  if (ctx.elastic) ctx.elastic->rendezvous->mark_done();
}

}  // namespace dpt
