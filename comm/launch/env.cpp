#include "comm/launch/env.h"

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>


namespace dpt::env {

namespace detail {

// Marks, in the list below, where the registered algorithms' thresholds go.
constexpr Knob kAlgorithmThresholds{nullptr, "", ""};

// The knobs declared here. kAlgo's meaning is written from the registered names.
const std::vector<Knob>& declared_knobs() {
  static const std::vector<Knob> k = {
      {kBackend, "auto", "backend when --backend is not given: mpi, tcp, nccl or auto"},
      {kAlgo, "auto", ""},
      {kTimeoutS, "300", "seconds any single wait may take before it fails with an error"},
      {kRendezvousTimeoutS, "120", "seconds to wait for all ranks to join the store"},
      kAlgorithmThresholds,
      {kSegmentBytes, "1048576", "ring pipelining: bytes per segment of a chunk"},
      {kHierarchicalPieceBytes, "1048576",
       "hierarchical allreduce: buffers of at least two such pieces run as a pipeline of pieces (one piece's host "
       "reduce-scatter or allgather while another crosses the network); 0 = never"},
      {kWaitersRun, "1",
       "1 = a thread waiting on a queued (async) collective runs it, and those issued before it, itself, so a batch "
       "issued then waited costs no thread hand-off; the worker thread runs what nobody waits for; 0 = only the worker "
       "thread runs queued collectives"},
      {kLogLevel, "warn", "log level: debug, info, warn, error"},
      {kTcpIfname, "", "tcp backend: network interface to listen on (default: the one MASTER_ADDR is reached by)"},
      {kTcpAddr, "", "tcp backend: address to listen on (overrides COMM_TCP_IFNAME)"},
      {kTcpFamily, "auto", "tcp backend: address family, ipv4, ipv6 or auto"},
      {kMaxFrameBytes, "1073741824", "tcp backend: largest frame a receiver accepts"},
      {"COMM_TCP_SHM", "1",
       "tcp backend: 1 = peers on the same host exchange data through shared memory (the TCP connection stays for liveness); 0 = TCP only"},
      {"COMM_TCP_SHM_RING_BYTES", "1048576",
       "tcp backend: bytes of each shared-memory ring (per direction per peer pair; a power of two; smaller where "
       "COMM_TCP_SHM_INBOX_BYTES says)"},
      {"COMM_TCP_SHM_INBOX_BYTES", "16777216",
       "tcp backend: the most bytes of rings into one rank (its inbox): with more same-host peers than it holds rings of "
       "COMM_TCP_SHM_RING_BYTES, each ring is this divided by the peers, rounded down to a power of two (at least 4096); "
       "a ring takes memory only once its pair talks"},
      {"COMM_TCP_SHM_SPIN_US", "200",
       "tcp backend: microseconds a shared-memory wait spins before it sleeps (the engine polling its rings after the last byte "
       "moved; a collective waiting at an arena barrier)"},
      {"COMM_TCP_SHM_COLL", "1",
       "tcp backend: 1 = when every rank is on one host, collectives run in one shared-memory arena (`auto` and `native` pick "
       "them); 0 = collectives are always messages"},
      {"COMM_TCP_SHM_SLOT_BYTES", "262144",
       "tcp backend: bytes each rank moves per round in the shared-memory arena (two slots per rank; a multiple of 4096)"},
      {"COMM_TCP_DRIVE", "1",
       "tcp backend over sockets only: 1 = a thread waiting on an operation moves the bytes itself (poll, send, recv) "
       "instead of waking up when the progress thread hands it the result; 0 = only the progress thread does"},
      {"COMM_TCP_MAX_UNEXPECTED_BYTES", "268435456",
       "tcp backend: bytes of messages buffered before their receive is posted; beyond it the sender is slowed (TCP flow control)"},
      {kJobToken, "",
       "tcp backend and store: per-job secret every connection proves with HMAC-SHA256 and derives its record keys "
       "from (at least 16 characters and an estimated 64 bits; tools/launch, mpirun and srun runs provide one when "
       "unset; never logged)"},
      {kRunOpen, "0",
       "tcp backend and store: 1 = a job reachable from other hosts may run without COMM_JOB_TOKEN (anyone who "
       "reaches its ports can join it and read its traffic); 0 = such a job refuses to start"},
      {"COMM_TCP_ENCRYPT", "auto",
       "tcp backend and store: auto = records are encrypted unless the connection is loopback; 1 = always; "
       "0 = authenticated only (bytes in clear, every record still checked)"},
      {"COMM_TCP_CIPHER", "",
       "tcp backend and store: aes-256-gcm or chacha20-poly1305 (default: AES-GCM where the CPU has AES and "
       "carry-less multiply instructions, else ChaCha20-Poly1305)"},
      {"COMM_MUNGE_SOCKET", "",
       "munged's socket for the job token by munge (default: AuthInfo's socket= in $SLURM_CONF, else munge's own)"},
      {"COMM_JOB_TOKEN_BY_MUNGE", "0",
       "set by build/bin/launch --nnodes for its ranks where munge works and COMM_JOB_TOKEN is unset: 1 = rank 0 draws "
       "the token and its store hands it out as munge credentials"},
      {"COMM_STORE_MAX_KEYS", "1048576", "tcp store: most keys it holds; a set beyond is refused"},
      {"COMM_STORE_MAX_BYTES", "1073741824", "tcp store: most bytes of keys and values it holds; a set beyond is refused"},
      {kDebugCollectives, "0",
       "1 = before each collective the ranks compare (op, dtype, count, root, sequence number) and raise "
       "MismatchError on a difference (costs one small allgather per collective)"},
      {kStagingSegmentBytes, "4194304",
       "device buffers on a backend that moves host memory: bytes per pipelined staging segment (device-to-host copy, "
       "collective and host-to-device copy of successive segments overlap)"},
      {"COMM_FAKE_HOSTS", "",
       "tests and benchmarks only: H, H:block or H:cyclic = the ranks are taken to sit on H hosts, numbered by blocks or "
       "round robin (the hierarchical algorithms then run on one machine); unset: hosts from each rank's host id "
       "(hostname, boot id, network namespace)"},
      {"DPT_CUDA_ATTENTION", "fused",
       "models on CUDA: fused = causal attention by the flash-style kernels (memory O(T) per row; bf16/fp16 on tensor "
       "cores, else fp32); materialized = the [B, H, T, T] scores through cuBLAS at the pass's precision (docs/gpu.md; "
       "read by models/nn/layers/attention.cpp)"},
      {kEmulateDevice, "0",
       "tests only: 1 = cuda:0 is emulated with host memory, so the device-buffer paths run on a machine without a GPU"},
      {kMaxCpuIsa, "",
       "tests and benchmarks: sse, avx, avx2, avx512, avx512_bf16 or amx = the CPU kernels (ours and oneDNN's) use "
       "instruction sets up to that level only, so the paths of a lesser CPU run here; unset: the CPU's own "
       "(device/cpu_isa.h, docs/usage.md \"Compute kernels\")"},
      {"DPT_FLIGHT", "1",
       "1 = every communicator keeps its last DPT_FLIGHT_ENTRIES operations (the flight recorder, "
       "comm/dispatch/flight_recorder.h), written to DPT_FLIGHT_DIR on a timeout, an abort, SIGUSR2 or a request "
       "through the job's store (build/bin/flight_request); 0 = off"},
      {"DPT_FLIGHT_ENTRIES", "2048", "the flight recorder: collectives kept per communicator (a quarter as many "
                                     "point-to-point calls)"},
      {"DPT_FLIGHT_DIR", "",
       "the flight recorder: where each process writes rank<R>.json; unset: $TMPDIR/dpt_flight (/tmp/dpt_flight). "
       "tools/flight_report.py DIR reads every rank's"},
      {kElasticSettleS, "10",
       "elastic training: seconds a survivor waits for members that neither arrived nor were seen dead (a hung or "
       "unreachable rank) before the next generation forms without them"},
      {kElasticId, "", "elastic training (set by launch --elastic): this process's name for the job, e.g. n0.l2.i1"},
      {kElasticMin, "", "elastic training (set by launch --elastic): the fewest members the job may shrink to"},
      {kElasticMax, "", "elastic training (set by launch --elastic): the most members the job may grow to"},
      {"OMP_NUM_THREADS / OPENBLAS_NUM_THREADS", "",
       "compute threads per rank (products, loops); OPENBLAS_NUM_THREADS wins over OMP_NUM_THREADS, train's --threads "
       "over both; unset: the cores this process may use (affinity mask, cgroup cpuset and quota) divided by the ranks "
       "on its host, at least 1 (comm/launch/thread_plan.h); launch sets OMP_NUM_THREADS so for each rank it starts"},
      {"OMP_WAIT_POLICY", "",
       "PASSIVE or ACTIVE: how compute threads wait between products; unset: passive where a rank's threads plus its "
       "comm engine exceed its cores (set by launch, or by the program re-executing itself once), else active"},
      {kLaunchThreads, "", "set by launch with OMP_NUM_THREADS: the value it chose, so a rank's header can say who set it"},
      {kWaitSetBy, "", "set with OMP_WAIT_POLICY by launch or by a program's re-exec: who chose passive waiting"},
      {kNoReexec, "", "set (to anything): a program that needs passive waiting does not re-execute itself to get it (its threads may spin)"},
      {kTorchTransport, "tcp",
       "torch.distributed backend \"dpt\" (import dpt_torch): the transport under PyTorch's process groups, tcp "
       "(shared memory between same-host ranks) or mpi (under mpirun)"},
      {kTorchAlgo, "", "torch.distributed backend \"dpt\": collective algorithm as --algo (unset: COMM_ALGO)"},
      {"MASTER_ADDR", "127.0.0.1", "rendezvous host: rank 0 serves the store there (under launch --elastic, node 0's launcher does); under srun it defaults to the step's first node (SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST)"},
      {"MASTER_PORT", "29500", "rendezvous port (under mpirun without it, a free port is agreed over MPI; under srun, 10000 + (SLURM_JOB_ID % 2500) * 8 + SLURM_STEP_ID % 8)"},
      {"RANK / WORLD_SIZE / LOCAL_RANK", "", "torchrun-style launch variables (also read: OMPI_COMM_WORLD_*, PMI_*, SLURM_*)"},
  };
  return k;
}

}  // namespace detail

using detail::declared_knobs;

// The declared knobs only: the algorithms' thresholds have their defaults with the
// algorithm (read through get_int(name, fallback)), so the getters need no registry and
// a program that links only the parsers (tests/fuzz) links this file alone.
static const Knob* find(const char* name) {
  for (const auto& k : declared_knobs())
    if (k.name && std::string_view(k.name) == name) return &k;  // (the thresholds' marker has none)
  return nullptr;
}

std::string get_string(const char* name) {
  if (const char* v = std::getenv(name); v && *v) return v;
  const Knob* k = find(name);
  return k ? k->default_value : "";
}

int64_t get_int(const char* name) {
  std::string v = get_string(name);
  try {
    size_t pos = 0;
    int64_t x = std::stoll(v, &pos);
    if (pos != v.size()) throw std::invalid_argument("trailing characters");
    return x;
  } catch (const std::exception&) {
    throw std::invalid_argument(std::string("environment variable ") + name + "='" + v +
                                "' is not an integer");
  }
}

int64_t get_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? get_int(name) : fallback;
}

double get_double(const char* name) {
  std::string v = get_string(name);
  try {
    size_t pos = 0;
    double x = std::stod(v, &pos);
    if (pos != v.size()) throw std::invalid_argument("trailing characters");
    return x;
  } catch (const std::exception&) {
    throw std::invalid_argument(std::string("environment variable ") + name + "='" + v +
                                "' is not a number");
  }
}

bool get_bool(const char* name) {
  std::string v = get_string(name);
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no" || v.empty()) return false;
  throw std::invalid_argument(std::string("environment variable ") + name + "='" + v +
                              "' is not a boolean (use 1/0, true/false, on/off)");
}

std::chrono::milliseconds rendezvous_timeout() {
  const double s = get_double(kRendezvousTimeoutS);
  if (!(s > 0)) throw std::invalid_argument(std::string(kRendezvousTimeoutS) + " must be positive (got " + get_string(kRendezvousTimeoutS) + ")");
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

}  // namespace dpt::env
