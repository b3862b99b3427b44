#pragma once
// Every COMM_* environment knob with its default and meaning, in one list: knobs().
// Most are declared in env.cpp; an algorithm's `auto` threshold (COMM_RD_MAX_BYTES,
// COMM_TREE_MAX_BYTES, ...) is declared by the algorithm itself in its file
// (comm/algorithms/registry.h) and knobs() takes it from the registry. docs/environment.md's
// table is printed from knobs() (`launch --print-env`); tests/comm/algo_registry_test.cpp
// checks that the two agree.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "device/cpu_isa.h"  // kMaxCpuIsaVar
#include "device/runtime.h"  // kEmulateDeviceVar

namespace dpt::env {

struct Knob {
  const char* name;
  const char* default_value;  // "" = unset
  const char* meaning;
};

// The full list, the registered algorithms' thresholds included, in the order
// docs/environment.md shows it.
const std::vector<Knob>& knobs();

// Raw value or the default; throws std::invalid_argument naming the variable when a
// value does not parse, so a typo never silently becomes a default.
std::string get_string(const char* name);
int64_t get_int(const char* name);
// The variable's value when it is set, else `fallback` (knobs whose default lives with
// their owner: an algorithm's threshold).
int64_t get_int(const char* name, int64_t fallback);
double get_double(const char* name);
bool get_bool(const char* name);  // 1/0, true/false, on/off, yes/no
// COMM_RENDEZVOUS_TIMEOUT_S as a duration; std::invalid_argument unless positive.
std::chrono::milliseconds rendezvous_timeout();

// Names, so a typo in code is a compile error.
inline constexpr const char* kBackend = "COMM_BACKEND";
inline constexpr const char* kAlgo = "COMM_ALGO";
inline constexpr const char* kTimeoutS = "COMM_TIMEOUT_S";
inline constexpr const char* kRendezvousTimeoutS = "COMM_RENDEZVOUS_TIMEOUT_S";
// Thresholds declared by tree_allreduce.cpp and recursive_doubling_allreduce.cpp: the
// constants only let code name them (tools/comm_bench prints one); a new algorithm's
// threshold needs none.
inline constexpr const char* kTreeMaxBytes = "COMM_TREE_MAX_BYTES";
inline constexpr const char* kRdMaxBytes = "COMM_RD_MAX_BYTES";
inline constexpr const char* kSegmentBytes = "COMM_SEGMENT_BYTES";
inline constexpr const char* kHierarchicalPieceBytes = "COMM_HIERARCHICAL_PIECE_BYTES";
inline constexpr const char* kLogLevel = "COMM_LOG_LEVEL";
inline constexpr const char* kTcpIfname = "COMM_TCP_IFNAME";
inline constexpr const char* kTcpAddr = "COMM_TCP_ADDR";
inline constexpr const char* kTcpFamily = "COMM_TCP_FAMILY";
inline constexpr const char* kMaxFrameBytes = "COMM_MAX_FRAME_BYTES";
inline constexpr const char* kJobToken = "COMM_JOB_TOKEN";
inline constexpr const char* kRunOpen = "COMM_RUN_OPEN";
inline constexpr const char* kDebugCollectives = "COMM_DEBUG_COLLECTIVES";
inline constexpr const char* kWaitersRun = "COMM_WAITERS_RUN";
inline constexpr const char* kStagingSegmentBytes = "COMM_STAGING_SEGMENT_BYTES";
inline constexpr const char* kEmulateDevice = device::kEmulateDeviceVar;  // read by device/runtime.cpp
inline constexpr const char* kMaxCpuIsa = kMaxCpuIsaVar;                   // read by device/cpu_isa.h
inline constexpr const char* kElasticId = "DPT_ELASTIC_ID";
inline constexpr const char* kElasticMin = "DPT_ELASTIC_MIN";
inline constexpr const char* kElasticMax = "DPT_ELASTIC_MAX";
inline constexpr const char* kElasticSettleS = "COMM_ELASTIC_SETTLE_S";
// Threads per rank (comm/launch/thread_plan.h, train/cpu_threads_setup.h, tools/launch).
inline constexpr const char* kLaunchThreads = "DPT_LAUNCH_THREADS";
inline constexpr const char* kWaitSetBy = "DPT_WAIT_SET_BY";
inline constexpr const char* kNoReexec = "DPT_NO_REEXEC";
// The torch.distributed backend "dpt" (bindings/torch, docs/torch.md).
inline constexpr const char* kTorchTransport = "DPT_BACKEND";
inline constexpr const char* kTorchAlgo = "DPT_ALGO";

}  // namespace dpt::env
