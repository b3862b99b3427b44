#include "comm/dispatch/flight_recorder.h"
#include "comm/dispatch/timeline.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "comm/communicator.h"
#include "comm/launch/env.h"
#include "comm/launch/launch_env.h"
#include "device/safe_file.h"

namespace dpt {
namespace {

using Clock = std::chrono::steady_clock;
const Clock::time_point kEpoch = Clock::now();
int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - kEpoch).count(); }

const char* const kPhases[] = {"",     "data", "forward", "backward", "sync", "update",
                               "eval", "save", "outer",   "reform",   "other"};
constexpr uint8_t kOther = 10;  // the last: any name not above
std::atomic<int64_t> g_step{-1};
std::atomic<uint8_t> g_phase{0};
std::atomic<int32_t> g_bucket{-1};

// Every live recorder, for a dump.
std::mutex g_registry_mu;
std::vector<const FlightRecorder*>& registry() {
  static auto* r = new std::vector<const FlightRecorder*>;  // outlives every recorder
  return *r;
}
std::atomic<int> g_created{0};
std::atomic<bool> g_dumped{false};

size_t configured_capacity() {
  if (!env::get_bool("DPT_FLIGHT")) return 0;
  const int64_t n = env::get_int("DPT_FLIGHT_ENTRIES");
  if (n < 0) throw std::invalid_argument("DPT_FLIGHT_ENTRIES must be >= 0");
  return size_t(n);
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else out += c;
  }
  return out;
}

// SIGUSR2: the handler only writes a byte to a pipe; a watcher thread dumps.
int g_pipe[2] = {-1, -1};
void on_sigusr2(int) {
  const char b = 1;
  [[maybe_unused]] const ssize_t n = write(g_pipe[1], &b, 1);
}
void install_sigusr2_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (pipe(g_pipe) != 0) return;
    std::thread([] {
      char b;
      while (read(g_pipe[0], &b, 1) == 1) dump_flight_records("SIGUSR2");
    }).detach();
    struct sigaction sa {};
    sa.sa_handler = on_sigusr2;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &sa, nullptr);
  });
}

const char* kind_name(uint8_t k) {
  if (k == 100) return "send";
  if (k == 101) return "recv";
  return coll_name(static_cast<CollKind>(k));
}
const char* state_name(FlightRecorder::State s) {
  switch (s) {
    case FlightRecorder::State::scheduled: return "scheduled";
    case FlightRecorder::State::started: return "started";
    case FlightRecorder::State::completed: return "completed";
    case FlightRecorder::State::failed: return "failed";
    case FlightRecorder::State::posted: return "posted";
  }
  return "?";
}
const char* op_name(uint8_t op) {
  static const char* const names[] = {"sum", "prod", "min", "max", "avg"};
  return op < 5 ? names[op] : "?";
}

}  // namespace

void set_flight_step(int64_t step) { g_step.store(step, std::memory_order_relaxed); }
void set_flight_bucket(int32_t bucket) { g_bucket.store(bucket, std::memory_order_relaxed); }
void set_flight_phase(const char* phase) {
  uint8_t i = kOther;
  for (uint8_t k = 0; k < kOther; ++k)
    if (std::strcmp(phase, kPhases[k]) == 0) i = k;
  g_phase.store(i, std::memory_order_relaxed);
  if (timeline_on()) timeline_phase(kPhases[i], g_step.load(std::memory_order_relaxed), now_ns());
}
int64_t flight_now_ns() { return now_ns(); }

FlightRecorder::FlightRecorder(int rank, int size)
    : rank_(rank), size_(size), number_(g_created.fetch_add(1)),
      capacity_(configured_capacity()) {
  if (!capacity_) return;
  // The rings grow to their capacity as operations come (a communicator that carries a
  // few collectives costs a few entries, not the whole ring).
  install_sigusr2_once();
  std::lock_guard<std::mutex> lk(g_registry_mu);
  registry().push_back(this);
}

FlightRecorder::~FlightRecorder() {
  if (!capacity_) return;
  std::lock_guard<std::mutex> lk(g_registry_mu);
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), this), r.end());
}

void FlightRecorder::fill_context(Entry& e) const {
  e.step = g_step.load(std::memory_order_relaxed);
  e.phase = g_phase.load(std::memory_order_relaxed);
  e.bucket = g_bucket.load(std::memory_order_relaxed);
}

FlightRecorder::Entry* FlightRecorder::slot_of_seq(int64_t seq) {
  if (seq < 0 || seq >= coll_next_ || seq + int64_t(capacity_) < coll_next_) return nullptr;
  const size_t i = size_t(seq) % capacity_;
  if (i >= coll_.size()) return nullptr;
  Entry& e = coll_[i];
  return e.seq == seq ? &e : nullptr;
}

void FlightRecorder::scheduled(const CollArgs& a) {
  if (!capacity_) return;
  Entry e;
  e.seq = a.seq;
  e.kind = static_cast<uint8_t>(a.kind);
  e.dtype = static_cast<uint8_t>(a.recv.dtype);
  e.op = static_cast<uint8_t>(a.op);
  e.root_or_peer = a.root;
  e.count = a.kind == CollKind::reduce_scatter || a.kind == CollKind::scatter ? a.recv.count : a.send.count;
  e.tag = a.tag;
  e.t_scheduled = now_ns();
  fill_context(e);
  std::lock_guard<std::mutex> lk(mu_);
  if (a.seq >= coll_next_) coll_next_ = a.seq + 1;
  const size_t i = size_t(a.seq) % capacity_;
  if (i >= coll_.size()) coll_.resize(i + 1);
  coll_[i] = std::move(e);
}

void FlightRecorder::started(int64_t seq, const char* algorithm) {
  if (!capacity_) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (Entry* e = slot_of_seq(seq)) {
    e->state = State::started;
    e->algorithm = algorithm;
    e->t_started = now_ns();
  }
}

void FlightRecorder::finished(int64_t seq, bool ok, const std::string& error) {
  if (!capacity_) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (Entry* e = slot_of_seq(seq)) {
    e->state = ok ? State::completed : State::failed;
    e->t_finished = now_ns();
    if (!ok) e->error = error;
    if (timeline_on())
      timeline_collective(kind_name(e->kind), e->count * dtype_size(static_cast<DType>(e->dtype)), e->algorithm,
                          e->step, e->bucket, e->t_started ? e->t_started : e->t_scheduled, e->t_finished, ok);
  }
}

uint64_t FlightRecorder::posted(bool send, size_t count, DType dtype, int peer, int64_t tag) {
  if (!capacity_) return 0;
  Entry e;
  e.kind = send ? 100 : 101;
  e.count = count;
  e.dtype = static_cast<uint8_t>(dtype);
  e.root_or_peer = peer;
  e.tag = tag;
  e.state = State::posted;
  e.t_scheduled = now_ns();
  fill_context(e);
  std::lock_guard<std::mutex> lk(mu_);
  e.id = p2p_next_++;
  const uint64_t id = e.id;
  const size_t i = id % p2p_capacity();
  if (i >= p2p_.size()) p2p_.resize(i + 1);
  p2p_[i] = std::move(e);
  return id;
}

void FlightRecorder::p2p_finished(uint64_t id) {
  if (!capacity_) return;
  std::lock_guard<std::mutex> lk(mu_);
  const size_t i = id % p2p_capacity();
  if (i >= p2p_.size()) return;
  Entry& e = p2p_[i];
  if (e.id != id || e.kind < 100) return;
  e.state = State::completed;
  e.t_finished = now_ns();
}

std::string FlightRecorder::json() const {
  std::lock_guard<std::mutex> lk(mu_);
  auto entry = [](const Entry& e) {
    std::string s = "{\"kind\":\"" + std::string(kind_name(e.kind)) + "\"";
    if (e.kind < 100) s += ",\"seq\":" + std::to_string(e.seq) + ",\"op\":\"" + op_name(e.op) + "\",\"root\":" +
                           std::to_string(e.root_or_peer) + ",\"algorithm\":\"" + e.algorithm + "\"";
    else s += ",\"id\":" + std::to_string(e.id) + ",\"peer\":" + std::to_string(e.root_or_peer);
    s += ",\"count\":" + std::to_string(e.count) + ",\"dtype\":\"" + dtype_name(static_cast<DType>(e.dtype)) +
         "\",\"tag\":" + std::to_string(e.tag) + ",\"state\":\"" + state_name(e.state) + "\",\"step\":" +
         std::to_string(e.step) + ",\"phase\":\"" + kPhases[std::min(e.phase, kOther)] + "\",\"bucket\":" +
         std::to_string(e.bucket) + ",\"t_scheduled_ns\":" + std::to_string(e.t_scheduled) +
         ",\"t_started_ns\":" + std::to_string(e.t_started) + ",\"t_finished_ns\":" + std::to_string(e.t_finished);
    if (!e.error.empty()) s += ",\"error\":\"" + escape(e.error) + "\"";
    return s + "}";
  };
  std::string out = "{\"communicator\":" + std::to_string(number_) + ",\"rank\":" + std::to_string(rank_) + ",\"size\":" + std::to_string(size_) +
                    ",\"capacity\":" + std::to_string(capacity_) + ",\"collectives\":[";
  bool first = true;
  const int64_t lo = std::max<int64_t>(0, coll_next_ - int64_t(capacity_));
  for (int64_t seq = lo; seq < coll_next_; ++seq) {
    const size_t i = size_t(seq) % capacity_;
    if (i >= coll_.size() || coll_[i].seq != seq) continue;
    const Entry& e = coll_[i];
    out += (first ? "" : ",") + entry(e);
    first = false;
  }
  out += "],\"p2p\":[";
  first = true;
  const uint64_t plo = p2p_next_ > p2p_capacity() ? p2p_next_ - p2p_capacity() : 0;
  for (uint64_t id = plo; id < p2p_next_; ++id) {
    const size_t i = id % p2p_capacity();
    if (i >= p2p_.size() || p2p_[i].id != id || p2p_[i].kind < 100) continue;
    const Entry& e = p2p_[i];
    out += (first ? "" : ",") + entry(e);
    first = false;
  }
  return out + "]}";
}

std::string flight_dump_path() {
  std::string dir = env::get_string("DPT_FLIGHT_DIR");
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/dpt_flight";
  }
  return dir + "/rank" + std::to_string(detect_launch().rank) + ".json";
}

std::string dump_flight_records(const std::string& reason, bool once, std::string* why_not) {
  auto none = [why_not](const std::string& why) {
    if (why_not) *why_not = why;
    return std::string();
  };
  if (configured_capacity() == 0) return none("recording is off (DPT_FLIGHT=0)");
  // The record of a failure is the one that matters: a later dump (SIGUSR2 from launch
  // as it stops the job, by which time the failed communicator may be gone) does not
  // replace it. Before any failure every dump replaces the last.
  if (once ? g_dumped.exchange(true) : g_dumped.load())
    return none("the record of a failure was written before and is kept: " + flight_dump_path());
  const std::string path = flight_dump_path();
  std::string body;
  {
    std::lock_guard<std::mutex> lk(g_registry_mu);
    for (const FlightRecorder* r : registry()) body += (body.empty() ? "" : ",") + r->json();
  }
  if (body.empty()) return none("no communicator is alive in this process");  // nothing to tell
  const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  const int64_t step = g_step.load();
  const uint8_t phase = g_phase.load();
  const std::string doc = "{\"format\":\"dpt-flight-1\",\"world_rank\":" + std::to_string(detect_launch().rank) +
                          ",\"pid\":" + std::to_string(getpid()) + ",\"reason\":\"" + escape(reason) +
                          "\",\"now_ns\":" + std::to_string(now_ns()) + ",\"unix_ns\":" + std::to_string(wall) +
                          ",\"step\":" + std::to_string(step) + ",\"phase\":\"" + kPhases[std::min(phase, kOther)] +
                          "\",\"communicators\":[" + body + "]}\n";
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  try {
    write_file_atomically(path, doc, FileAccess::umask);  // whole or not at all (device/safe_file.h)
  } catch (const FileWriteError& e) {
    std::fprintf(stderr, "flight recorder: %s\n", e.what());
    return none(e.what());
  }
  std::fprintf(stderr, "flight recorder: %s: this rank's last operations in %s (read every rank's with "
                       "tools/flight_report.py %s)\n",
               reason.c_str(), path.c_str(), std::filesystem::path(path).parent_path().c_str());
  return path;
}

}  // namespace dpt
