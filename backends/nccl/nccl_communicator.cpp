// The nccl backend: a Communicator over an NCCL communicator.
//
// Terms:
//   stream   - the one CUDA stream of this communicator. Every NCCL call (collective or
//              point-to-point) is enqueued on it, so operations run in issue order, as
//              the Communicator contract requires; NCCL calls are serialized by a mutex
//              because an NCCL communicator is not thread-safe.
//   settle   - the communicator is nonblocking (ncclConfig_t.blocking = 0), so any call
//              may return ncclInProgress; we then poll ncclCommGetAsyncError until it
//              reports success or an error, within the deadline. This is what lets a
//              missing rank at init, or a stuck peer later, end in an error instead of a
//              hang inside NCCL.
//   done     - a CUDA event recorded after the operation; the worker (collectives) or
//              the Work (point-to-point) polls it and the async error together, and
//              aborts the communicator (ncclCommAbort) when the timeout passes.
//   host buffers - NCCL moves device memory only. A collective on host buffers (the
//              byte-string helpers, a loss scalar) is copied to the device and back, so
//              every Communicator call works; the trainer's gradients are on the device.
// Point-to-point: NCCL matches sends and receives between a pair in issue order and has
// no tags; the tag is checked against the Communicator's range and otherwise unused. An
// exchange in which both ranks send first deadlocks in NCCL (as blocking MPI_Send may);
// order one side's receive first, or use a collective.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>

#include "backends/nccl/nccl_backend.h"
#include "comm/device/device_reduce.h"
#include "comm/net/log.h"

namespace dpt {

namespace {

using Clock = std::chrono::steady_clock;

bool nccl_type(DType t, ncclDataType_t* out) {
  switch (t) {
    case DType::f32: *out = ncclFloat32; return true;
    case DType::f64: *out = ncclFloat64; return true;
    case DType::f16: *out = ncclFloat16; return true;
    case DType::bf16: *out = ncclBfloat16; return true;
    case DType::i8: *out = ncclInt8; return true;
    case DType::u8: *out = ncclUint8; return true;
    case DType::i32: *out = ncclInt32; return true;
    case DType::i64: *out = ncclInt64; return true;
  }
  return false;
}

// avg on floats is NCCL's own; on integers it is sum, then our division, so integer
// averages truncate toward zero on every backend alike.
ncclRedOp_t nccl_op(ReduceOp op, DType t) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::prod: return ncclProd;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::avg: return is_floating(t) ? ncclAvg : ncclSum;
  }
  return ncclSum;
}

std::string nccl_text(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += std::string(" (") + last + ")";
  return s;
}

void cuda_check(cudaError_t e, const ErrorContext& ctx, const char* what) {
  if (e != cudaSuccess)
    throw CommError(ctx, std::string(what) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// Sleeps a little more the longer a wait lasts: fast completion is seen within
// microseconds, a long collective costs no core.
void backoff(int& spins) {
  if (++spins < 1000) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// Waits until `comm` is no longer in progress after a call returned `r`.
void settle(ncclComm_t comm, ncclResult_t r, Clock::time_point deadline, const ErrorContext& ctx,
            const char* what, Millis timeout) {
  int spins = 0;
  while (r == ncclInProgress) {
    if (Clock::now() > deadline) {
      ncclCommAbort(comm);
      throw TimeoutError(ctx, std::string(what) + " did not complete within " +
                                  std::to_string(timeout.count() / 1000.0) +
                                  " s; the NCCL communicator was aborted (a rank missing or stuck?)");
    }
    backoff(spins);
    if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) break;
  }
  if (r != ncclSuccess) throw CommError(ctx, std::string(what) + ": " + nccl_text(r, comm));
}

class NcclCommunicator;

// Point-to-point Work: done when the event after the operation has passed.
class EventWork : public Work {
 public:
  EventWork(NcclCommunicator* owner, cudaEvent_t ev, ErrorContext ctx) : owner_(owner), ev_(ev), ctx_(std::move(ctx)) {}
  ~EventWork() override { cudaEventDestroy(ev_); }
  bool test() override;
  void wait(Millis timeout) override;

 private:
  NcclCommunicator* owner_;
  cudaEvent_t ev_;
  ErrorContext ctx_;
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(int rank, int size, CommOptions o, ncclComm_t comm, int device, std::shared_ptr<void> keep)
      : Communicator(rank, size, o), comm_(comm), device_(device), keep_alive_(std::move(keep)) {
    cudaSetDevice(device_);
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), context("init"), "cudaStreamCreate");
    cuda_check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), context("init"), "cudaEventCreate");
  }

  ~NcclCommunicator() override {
    shutdown_worker();
    cudaSetDevice(device_);
    if (failed_.load()) {
      ncclCommAbort(comm_);
    } else {
      // Finalize flushes outstanding work; within the timeout, else abort.
      try {
        settle(comm_, ncclCommFinalize(comm_), Clock::now() + timeout(), context("finalize"), "ncclCommFinalize", timeout());
        ncclCommDestroy(comm_);
      } catch (const std::exception& e) {
        log::warn("nccl: {}", e.what());
      }
    }
    cudaEventDestroy(done_);
    cudaStreamDestroy(stream_);
  }

  std::string backend_name() const override { return "nccl"; }

  // Polls `ev` (recorded on the stream after an operation) and the communicator's async
  // error until the event passes or `timeout` runs out; aborts the communicator on
  // either failure. Called by the worker and by EventWork.
  void wait_event(cudaEvent_t ev, Millis timeout, const ErrorContext& ctx) {
    const auto deadline = Clock::now() + timeout;
    int spins = 0;
    for (;;) {
      cudaError_t e = cudaEventQuery(ev);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) {
        fail_comm();
        cuda_check(e, ctx, "cudaEventQuery");
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        std::string why = nccl_text(async, comm_);
        fail_comm();
        throw PeerError(ctx, "NCCL reported an asynchronous error: " + why + "; the communicator was aborted");
      }
      if (Clock::now() > deadline) {
        fail_comm();
        throw TimeoutError(ctx, "not complete after " + std::to_string(timeout.count() / 1000.0) +
                                    " s (a peer stuck, dead, or issuing a different operation); "
                                    "the NCCL communicator was aborted");
      }
      backoff(spins);
    }
  }

 protected:
  WorkPtr do_isend(const Buffer& buf, int peer, int64_t tag) override { return p2p(true, buf, peer); }
  WorkPtr do_irecv(const Buffer& buf, int peer, int64_t tag) override { return p2p(false, buf, peer); }

  bool native_supports(const CollArgs& a) const override {
    ncclDataType_t t;
    return a.kind == CollKind::barrier || nccl_type(a.recv.dtype, &t);
  }
  bool takes_device_buffers(const CollArgs&, Algo) const override { return true; }
  bool takes_device_p2p() const override { return true; }
  bool runs_algorithms() const override { return false; }
  bool runs_on_caller() const override { return false; }
  // `auto` must resolve to NCCL's own collectives: ours cannot run on this backend.
  bool native_preferred(const CollArgs&) const override { return true; }

  void run_native(const CollArgs& a) override;

  std::unique_ptr<Communicator> do_split(int color, int key) override {
    const ErrorContext ctx = context("split");
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t sub = nullptr;
    {
      std::lock_guard<std::mutex> lk(nccl_mu_);
      cudaSetDevice(device_);
      settle(comm_, ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, &cfg),
             Clock::now() + timeout(), ctx, "ncclCommSplit", timeout());
    }
    if (!sub) return nullptr;
    int r = 0, n = 0;
    ncclCommUserRank(sub, &r);
    ncclCommCount(sub, &n);
    return std::make_unique<NcclCommunicator>(r, n, options(), sub, device_, keep_alive_);
  }

  void do_abort(const std::string&) override { fail_comm(); }

 private:
  void fail_comm() {
    if (!failed_.exchange(true)) ncclCommAbort(comm_);
  }

  void require_device(const Buffer& b, const ErrorContext& ctx) const {
    if (b.count > 0 && b.device.is_cpu())
      throw UsageError(ctx, "the nccl backend moves device memory; this buffer is on the cpu (allocate it on cuda:" +
                                std::to_string(device_) + ")");
  }

  WorkPtr p2p(bool is_send, const Buffer& buf, int peer) {
    const ErrorContext ctx = context(is_send ? "send" : "recv", peer);
    require_device(buf, ctx);
    ncclDataType_t t = ncclUint8;
    cudaEvent_t ev = nullptr;
    std::lock_guard<std::mutex> lk(nccl_mu_);
    cudaSetDevice(device_);
    cuda_check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), ctx, "cudaEventCreate");
    ncclResult_t r = is_send ? ncclSend(buf.data, buf.bytes(), t, peer, comm_, stream_)
                             : ncclRecv(buf.data, buf.bytes(), t, peer, comm_, stream_);
    try {
      settle(comm_, r, Clock::now() + timeout(), ctx, is_send ? "ncclSend" : "ncclRecv", timeout());
      cuda_check(cudaEventRecord(ev, stream_), ctx, "cudaEventRecord");
    } catch (...) {
      cudaEventDestroy(ev);
      throw;
    }
    return std::make_shared<EventWork>(this, ev, ctx);
  }

  // Enqueues the collective on the stream (buffers already on the device).
  void enqueue(const CollArgs& a, const Buffer& send, const Buffer& recv, const ErrorContext& ctx);

  ncclComm_t comm_;
  int device_;
  std::shared_ptr<void> keep_alive_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  std::mutex nccl_mu_;
  std::atomic<bool> failed_{false};
  device::DeviceMemory barrier_word_;
};

bool EventWork::test() {
  cudaError_t e = cudaEventQuery(ev_);
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) return false;
  owner_->wait_event(ev_, Millis(0), ctx_);  // reports the error
  return true;
}

void EventWork::wait(Millis timeout) { owner_->wait_event(ev_, timeout, ctx_); }

void NcclCommunicator::enqueue(const CollArgs& a, const Buffer& s, const Buffer& rcv, const ErrorContext& ctx) {
  const int n = size(), me = rank();
  ncclDataType_t t = ncclUint8;
  if (a.kind != CollKind::barrier) nccl_type(a.recv.dtype, &t);
  const ncclRedOp_t op = nccl_op(a.op, a.recv.dtype);
  const size_t esize = a.kind == CollKind::barrier ? 1 : dtype_size(a.recv.dtype);
  auto at = [&](const Buffer& b, size_t elems) { return static_cast<char*>(b.data) + elems * esize; };
  const auto deadline = Clock::now() + timeout();
  auto check = [&](ncclResult_t r, const char* what) { settle(comm_, r, deadline, ctx, what, timeout()); };
  // gather, scatter and alltoall are grouped point-to-point; a rank's own block is a
  // device copy.
  auto group = [&](auto&& body) {
    check(ncclGroupStart(), "ncclGroupStart");
    body();
    check(ncclGroupEnd(), "ncclGroupEnd");
  };
  switch (a.kind) {
    case CollKind::allreduce:
      check(ncclAllReduce(s.data, rcv.data, rcv.count, t, op, comm_, stream_), "ncclAllReduce");
      break;
    case CollKind::reduce:
      check(ncclReduce(s.data, rcv.data, s.count, t, op, a.root, comm_, stream_), "ncclReduce");
      break;
    case CollKind::broadcast:
      check(ncclBroadcast(rcv.data, rcv.data, rcv.count, t, a.root, comm_, stream_), "ncclBroadcast");
      break;
    case CollKind::reduce_scatter:
      check(ncclReduceScatter(s.data, rcv.data, rcv.count, t, op, comm_, stream_), "ncclReduceScatter");
      break;
    case CollKind::allgather:
      check(ncclAllGather(s.data, rcv.data, s.count, t, comm_, stream_), "ncclAllGather");
      break;
    case CollKind::gather:
      group([&] {
        if (me == a.root) {
          for (int p = 0; p < n; ++p) {
            if (p == me) {
              if (at(rcv, size_t(p) * s.count) != s.data)
                cuda_check(cudaMemcpyAsync(at(rcv, size_t(p) * s.count), s.data, s.bytes(), cudaMemcpyDefault, stream_), ctx, "cudaMemcpyAsync");
            } else {
              check(ncclRecv(at(rcv, size_t(p) * s.count), s.count, t, p, comm_, stream_), "ncclRecv");
            }
          }
        } else {
          check(ncclSend(s.data, s.count, t, a.root, comm_, stream_), "ncclSend");
        }
      });
      break;
    case CollKind::scatter:
      group([&] {
        if (me == a.root) {
          for (int p = 0; p < n; ++p) {
            if (p == me) {
              if (at(s, size_t(p) * rcv.count) != rcv.data)
                cuda_check(cudaMemcpyAsync(rcv.data, at(s, size_t(p) * rcv.count), rcv.bytes(), cudaMemcpyDefault, stream_), ctx, "cudaMemcpyAsync");
            } else {
              check(ncclSend(at(s, size_t(p) * rcv.count), rcv.count, t, p, comm_, stream_), "ncclSend");
            }
          }
        } else {
          check(ncclRecv(rcv.data, rcv.count, t, a.root, comm_, stream_), "ncclRecv");
        }
      });
      break;
    case CollKind::alltoall: {
      const size_t per = rcv.count / size_t(n);
      group([&] {
        for (int p = 0; p < n; ++p) {
          if (p == me) {
            cuda_check(cudaMemcpyAsync(at(rcv, size_t(p) * per), at(s, size_t(p) * per), per * esize, cudaMemcpyDefault, stream_), ctx, "cudaMemcpyAsync");
          } else {
            check(ncclSend(at(s, size_t(p) * per), per, t, p, comm_, stream_), "ncclSend");
            check(ncclRecv(at(rcv, size_t(p) * per), per, t, p, comm_, stream_), "ncclRecv");
          }
        }
      });
      break;
    }
    case CollKind::barrier: {
      // An allreduce of one byte: every rank must arrive before any leaves.
      if (!barrier_word_.data()) barrier_word_ = device::DeviceMemory(Device{DeviceKind::cuda, device_}, 1);
      check(ncclAllReduce(barrier_word_.data(), barrier_word_.data(), 1, ncclUint8, ncclSum, comm_, stream_), "ncclAllReduce");
      break;
    }
  }
}

void NcclCommunicator::run_native(const CollArgs& a) {
  const ErrorContext ctx = context(std::string(coll_name(a.kind)) + "/nccl", -1, a.seq);
  cudaSetDevice(device_);
  // Host buffers: copy the span covering send and recv (they may overlap, in place) to
  // the device, run there, copy recv back.
  Buffer s = a.send, r = a.recv;
  device::DeviceMemory s_dev, r_dev;
  const Device dev{DeviceKind::cuda, device_};
  const bool host_send = s.count > 0 && s.data && s.device.is_cpu();
  const bool host_recv = r.count > 0 && r.data && r.device.is_cpu();
  if (host_send || host_recv) {
    if (host_send != host_recv && s.count > 0 && r.count > 0)
      throw UsageError(ctx, "send and recv must both be on the device or both on the cpu");
    char* sp = static_cast<char*>(s.data);
    char* rp = static_cast<char*>(r.data);
    const bool overlap = host_send && host_recv && sp < rp + r.bytes() && rp < sp + s.bytes();
    if (overlap) {
      char* lo = std::min(sp, rp);
      char* hi = std::max(sp + s.bytes(), rp + r.bytes());
      r_dev = device::DeviceMemory(dev, size_t(hi - lo));
      device::copy(r_dev.data(), lo, size_t(hi - lo));
      s.data = static_cast<char*>(r_dev.data()) + (sp - lo);
      r.data = static_cast<char*>(r_dev.data()) + (rp - lo);
    } else {
      if (host_send) {
        s_dev = device::DeviceMemory(dev, s.bytes());
        device::copy(s_dev.data(), s.data, s.bytes());
        s.data = s_dev.data();
      }
      if (host_recv) {
        r_dev = device::DeviceMemory(dev, r.bytes());
        r.data = r_dev.data();
      }
    }
    s.device = r.device = dev;
  }
  {
    std::lock_guard<std::mutex> lk(nccl_mu_);
    enqueue(a, s, r, ctx);
    cuda_check(cudaEventRecord(done_, stream_), ctx, "cudaEventRecord");
  }
  wait_event(done_, timeout(), ctx);
  if (a.op == ReduceOp::avg && !is_floating(a.recv.dtype)) {
    const bool has_result = a.kind == CollKind::allreduce || a.kind == CollKind::reduce_scatter ||
                            (a.kind == CollKind::reduce && rank() == a.root);
    if (has_result) device::divide_in_place(dev, r.data, r.count, r.dtype, size());
  }
  // reduce and gather write recv only at the root.
  const bool recv_written = !((a.kind == CollKind::reduce || a.kind == CollKind::gather) && rank() != a.root);
  if (host_recv && recv_written) device::copy(a.recv.data, r.data, a.recv.bytes());
}

}  // namespace

std::string nccl_status() {
  int v = 0;
  ncclGetVersion(&v);
  std::string why;
  const int n = device::count(&why);
  std::string out = "built (NCCL " + std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
                    std::to_string(v % 100) + ")";
  return n > 0 ? out + ", " + std::to_string(n) + " CUDA device(s)" : out + ", but no usable CUDA device: " + why;
}

std::unique_ptr<Communicator> create_nccl_communicator(const NcclBootstrap& b, CommOptions options) {
  ErrorContext ctx{b.rank, b.world_size, "nccl", "init", -1, -1};
  std::string why;
  const int devices = device::count(&why);
  if (device::emulated())
    throw NotBuiltError("backend 'nccl' needs a real GPU; DPT_EMULATE_DEVICE=1 emulates one for the other backends only");
  if (devices == 0)
    throw NotBuiltError("backend 'nccl': no usable CUDA device here: no NVIDIA GPU, or its driver is missing or older "
                        "than the CUDA runtime (" + why + "); NCCL runs on GPUs only: on the CPU use --backend tcp "
                        "(any launcher) or --backend mpi (under mpirun)");
  if (b.world_size > 1 && b.local_size > devices)
    throw UsageError(ctx, std::to_string(b.local_size) + " ranks on this host share " + std::to_string(devices) +
                              " GPU(s); NCCL needs one GPU per rank (use --backend mpi or tcp to share a GPU)");
  const int dev = b.local_rank % devices;
  cuda_check(cudaSetDevice(dev), ctx, "cudaSetDevice");

  ncclUniqueId id{};
  std::string mine;
  if (b.rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) throw CommError(ctx, std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
    mine.assign(id.internal, sizeof(id.internal));
  }
  const std::string shared = b.world_size == 1 ? mine : b.share_from_rank0(mine);
  if (shared.size() != sizeof(id.internal))
    throw CommError(ctx, "received an NCCL unique id of " + std::to_string(shared.size()) + " bytes, expected " +
                             std::to_string(sizeof(id.internal)));
  std::memcpy(id.internal, shared.data(), sizeof(id.internal));

  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, b.world_size, id, b.rank, &cfg);
  if (r != ncclSuccess && r != ncclInProgress)
    throw CommError(ctx, std::string("ncclCommInitRankConfig: ") + ncclGetErrorString(r));
  settle(comm, r, Clock::now() + b.init_timeout, ctx, "NCCL communicator init (all ranks must join)", b.init_timeout);
  log::debug("nccl: rank {} of {} on cuda:{}", b.rank, b.world_size, dev);
  return std::make_unique<NcclCommunicator>(b.rank, b.world_size, options, comm, dev, b.keep_alive);
}

}  // namespace dpt
