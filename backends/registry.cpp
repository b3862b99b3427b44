// The registry: walks the list of registered backends (registration.h); it knows none of
// them by name and has no build-dependent code.
#include "backends/registry.h"

#include <cstdlib>
#include <stdexcept>

#include "backends/registration.h"
#include "comm/launch/env.h"
#include "comm/launch/launch_env.h"
#include "comm/net/log.h"

namespace dpt::backends {

namespace {

constexpr const char* kAuto = "auto";

const Entry* find(const std::string& name) {
  for (const Entry& e : entries())
    if (name == e.name) return &e;
  return nullptr;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// "mpi, tcp, auto; not built here: nccl (needs CUDA)".
std::string valid_names() {
  std::string out = join(available()) + ", " + kAuto;
  std::string absent;
  for (const Entry& e : entries())
    if (!e.registration) absent += std::string(absent.empty() ? "" : ", ") + e.name + " (" + e.not_built_reason + ")";
  return absent.empty() ? out : out + "; not built here: " + absent;
}

[[noreturn]] void throw_unknown(const std::string& name) {
  throw std::invalid_argument("unknown backend '" + name + "'; valid backends: " + valid_names());
}

const Registration& built(const Entry& e) {
  if (!e.registration)
    throw NotBuiltError("backend '" + std::string(e.name) + "' is not built (" + e.not_built_reason +
                        "); built backends: " + join(available()) + " (--backend tcp runs under any launcher)");
  return *e.registration;
}

// The entry `name` means under this launch; "auto" as documented in registry.h.
const Entry& entry_for(const std::string& name, const LaunchInfo& li) {
  if (name != kAuto) {
    const Entry* e = find(name);
    if (!e) throw_unknown(name);
    return *e;
  }
  for (const Entry& e : entries())
    if (e.registration && e.registration->takes_auto && e.registration->takes_auto(li)) return e;
  throw NotBuiltError("no built backend takes 'auto' under this launch; built backends: " + join(available()));
}

// The launcher's broadcast from rank 0, from the first backend that offers one here.
ShareFromRank0 launcher_share(const LaunchInfo& li) {
  for (const Entry& e : entries())
    if (e.registration && e.registration->launcher_share)
      if (ShareFromRank0 s = e.registration->launcher_share(li)) return s;
  return nullptr;
}

}  // namespace

const std::vector<std::string>& known() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> out;
    for (const Entry& e : entries()) out.push_back(e.name);
    out.push_back(kAuto);
    return out;
  }();
  return k;
}

std::vector<std::string> available() {
  std::vector<std::string> out;
  for (const Entry& e : entries())
    if (e.registration) out.push_back(e.name);
  return out;
}

std::string describe(const std::string& name) {
  const Entry* e = find(name);
  if (!e) return name + ": unknown";
  if (!e->registration) return name + ": not built (" + e->not_built_reason + ")";
  return name + ": " + e->registration->status();
}

std::string default_name() { return env::get_string(env::kBackend); }

std::string resolve(const std::string& name) {
  if (name != kAuto) return name;
  return entry_for(name, detect_launch()).name;
}

std::unique_ptr<Communicator> create(const std::string& requested, CommOptions options) {
  // A misspelt name is reported as such before the launch variables are read.
  if (requested != kAuto && !find(requested)) throw_unknown(requested);
  // launch --elastic serves the job's store on MASTER_PORT itself: a fixed-size world
  // would fail on rank 0's port and leave the others waiting out the rendezvous timeout.
  if (const char* id = std::getenv(env::kElasticId); id && *id)
    throw std::invalid_argument(std::string("this process was started by launch --elastic (") + env::kElasticId + "=" + id +
                                "), whose launcher serves the rendezvous store on MASTER_PORT, but it asked for a "
                                "fixed-size '" + requested + "' world: only train --elastic and programs whose dpt::init is "
                                "given InitOptions::elastic (or --elastic) run under launch --elastic; "
                                "start this program with a plain build/bin/launch -n N");
  const LaunchInfo li = detect_launch();
  const Entry& e = entry_for(requested, li);
  std::unique_ptr<Communicator> c = built(e).create_world(li, options, launcher_share(li));
  log::set_rank(c->rank());
  log::info("created backend {} ({} of {})", e.name, c->rank(), c->size());
  return c;
}

std::unique_ptr<Communicator> create_in_store(const StoreGroup& g, CommOptions options) {
  const Entry* e = find(g.backend);
  if (e) built(*e);  // a known backend that is not built here says so
  if (!e || !e->registration->create_in_store) {
    std::vector<std::string> able;
    for (const Entry& x : entries())
      if (x.registration && x.registration->create_in_store) able.push_back(x.name);
    throw UsageError(ErrorContext{g.rank, g.size, g.backend, "init", -1, -1},
                     "backend '" + g.backend + "' cannot be made from a store; valid: " + join(able));
  }
  std::unique_ptr<Communicator> c = e->registration->create_in_store(g, options);
  log::set_rank(g.rank);
  log::info("group '{}': {} communicator, rank {} of {}", g.group_name, c->backend_name(), c->rank(), c->size());
  return c;
}

std::string share_over_mpi(const std::string& value) {
  const ShareFromRank0 share = launcher_share(detect_launch());
  return share ? share(value) : value;
}

void abort_job(int exit_code) {
  for (const Entry& e : entries())
    if (e.registration && e.registration->abort_job) e.registration->abort_job(exit_code);
}

}  // namespace dpt::backends
