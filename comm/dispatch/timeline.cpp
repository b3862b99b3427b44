#include "comm/dispatch/timeline.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <mutex>
#include <vector>

#include "comm/dispatch/flight_recorder.h"
#include "device/safe_file.h"

namespace dpt {
namespace {

// A long run keeps at most this many events (about 100 MB); later ones are counted.
constexpr size_t kMaxEvents = 1'000'000;

struct Event {
  const char* name;  // static storage (phase and collective names, algorithms)
  const char* algorithm;
  int64_t ts_ns, dur_ns;
  int64_t step;
  uint64_t bytes;
  int32_t bucket;
  uint8_t lane;  // 0 compute, 1 communication
  bool ok;
};

struct State {
  std::mutex mu;
  std::string dir;
  int rank = 0, world = 1;
  int64_t wall_minus_steady_us = 0;  // wall-clock microseconds at the recorder's epoch
  std::vector<Event> events;
  uint64_t dropped = 0;
  const char* phase = nullptr;  // the open phase
  int64_t phase_step = -1, phase_start = 0;
};

std::atomic<bool> g_on{false};
State& state() {
  static State s;
  return s;
}

void push(State& s, const Event& e) {
  if (s.events.size() < kMaxEvents)
    s.events.push_back(e);
  else
    ++s.dropped;
}

void close_phase(State& s, int64_t t_ns) {
  if (s.phase && *s.phase) push(s, {s.phase, "", s.phase_start, t_ns - s.phase_start, s.phase_step, 0, -1, 0, true});
  s.phase = nullptr;
}

void write_event(std::ostream& out, const State& s, const Event& e) {
  char buf[512];
  const double ts = double(s.wall_minus_steady_us) + double(e.ts_ns) / 1e3;
  std::snprintf(buf, sizeof buf,
                "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"step\":%lld",
                e.name, e.lane ? "comm" : "phase", ts, double(e.dur_ns) / 1e3, s.rank, int(e.lane),
                static_cast<long long>(e.step));
  out << buf;
  if (e.lane) {
    std::snprintf(buf, sizeof buf, ",\"bytes\":%llu,\"bucket\":%d,\"algorithm\":\"%s\",\"ok\":%s",
                  static_cast<unsigned long long>(e.bytes), e.bucket, e.algorithm, e.ok ? "true" : "false");
    out << buf;
  }
  out << "}}";
}

}  // namespace

void timeline_open(const std::string& dir, int rank, int world) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  std::filesystem::create_directories(dir);
  s.dir = dir;
  s.rank = rank;
  s.world = world;
  const int64_t wall_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  s.wall_minus_steady_us = wall_us - flight_now_ns() / 1000;
  s.events.clear();
  s.events.reserve(4096);
  s.dropped = 0;
  s.phase = nullptr;
  g_on.store(true);
}

bool timeline_on() { return g_on.load(std::memory_order_relaxed); }

void timeline_phase(const char* phase, int64_t step, int64_t t_ns) {
  if (!timeline_on()) return;
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  close_phase(s, t_ns);
  s.phase = phase;
  s.phase_step = step;
  s.phase_start = t_ns;
}

void timeline_collective(const char* kind, uint64_t bytes, const char* algorithm, int64_t step, int32_t bucket,
                         int64_t t_start_ns, int64_t t_end_ns, bool ok) {
  if (!timeline_on()) return;
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  push(s, {kind, algorithm ? algorithm : "", t_start_ns, t_end_ns - t_start_ns, step, bytes, bucket, 1, ok});
}

std::string timeline_close() {
  if (!g_on.exchange(false)) return "";
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  close_phase(s, flight_now_ns());
  const std::string path = s.dir + "/rank" + std::to_string(s.rank) + ".json";
  {
    std::ostringstream out;
    out << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"format\":\"dpt-trace-1\",\"rank\":" << s.rank
        << ",\"world\":" << s.world << ",\"dropped_events\":" << s.dropped << "},\"traceEvents\":[\n";
    out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << s.rank << ",\"args\":{\"name\":\"rank " << s.rank
        << "\"}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << s.rank
        << ",\"args\":{\"sort_index\":" << s.rank << "}},\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << s.rank
        << ",\"tid\":0,\"args\":{\"name\":\"compute\"}},\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << s.rank
        << ",\"tid\":1,\"args\":{\"name\":\"communication\"}}";
    for (const Event& e : s.events) {
      out << ",\n";
      write_event(out, s, e);
    }
    out << "\n]}\n";
    try {
      write_file_atomically(path, out.str(), FileAccess::umask);  // whole or not at all (device/safe_file.h)
    } catch (const FileWriteError&) {
      return "";
    }
  }
  s.events = {};
  return path;
}

}  // namespace dpt
