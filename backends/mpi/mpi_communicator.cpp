#include "backends/mpi/mpi_communicator.h"

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_Query_cuda_support
#endif

#include <climits>
#include <cstring>
#include <vector>

#include "backends/mpi/mpi_runtime.h"
#include "backends/mpi/mpi_work.h"
#include "comm/launch/host_identity.h"
#include "comm/device/device_reduce.h"

namespace dpt {
namespace {

// Whether this MPI library moves device pointers itself. Open MPI answers at run time
// (it may be built with CUDA support and still run without it); other MPIs or Open MPI
// builds without the extension are treated as not CUDA-aware.
bool mpi_is_cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

// MPI has no standard f16/bf16 datatype; those run on the project's algorithms.
bool mpi_type(DType t, MPI_Datatype* out) {
  switch (t) {
    case DType::f32: *out = MPI_FLOAT; return true;
    case DType::f64: *out = MPI_DOUBLE; return true;
    case DType::i8: *out = MPI_INT8_T; return true;
    case DType::u8: *out = MPI_UINT8_T; return true;
    case DType::i32: *out = MPI_INT32_T; return true;
    case DType::i64: *out = MPI_INT64_T; return true;
    default: return false;
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: case ReduceOp::avg: return MPI_SUM;
    case ReduceOp::prod: return MPI_PROD;
    case ReduceOp::min: return MPI_MIN;
    case ReduceOp::max: return MPI_MAX;
  }
  return MPI_SUM;
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(MPI_Comm base, CommOptions options)
      : Communicator(comm_rank(base), comm_size(base), options) {
    MPI_Comm_dup(base, &p2p_);
    MPI_Comm_dup(base, &algo_);
    MPI_Comm_dup(base, &native_);
    for (MPI_Comm c : {p2p_, algo_, native_}) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    int* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    tag_ub_ = flag && ub ? *ub : 32767;
    cuda_aware_ = mpi_is_cuda_aware();
    // Every rank's host (comm/launch/topology.h), for the hierarchical algorithms.
    uint64_t mine = host_id_digest(local_host_id());
    std::vector<uint64_t> all(static_cast<size_t>(size()));
    MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, p2p_);
    set_host_digests(all);
  }

  ~MpiCommunicator() override {
    shutdown_worker();
    if (mpi::is_initialized())
      for (MPI_Comm* c : {&p2p_, &algo_, &native_}) MPI_Comm_free(c);
  }

  std::string backend_name() const override { return "mpi"; }

 protected:
  WorkPtr do_isend(const Buffer& buf, int peer, int64_t tag) override {
    return post(true, buf, peer, tag);
  }
  WorkPtr do_irecv(const Buffer& buf, int peer, int64_t tag) override {
    return post(false, buf, peer, tag);
  }

  bool native_supports(const CollArgs& a) const override {
    MPI_Datatype t;
    if (a.kind == CollKind::barrier) return true;
    return mpi_type(a.recv.dtype, &t) && a.send.bytes() <= size_t(INT_MAX) && a.recv.bytes() <= size_t(INT_MAX);
  }

  // A CUDA-aware MPI gets device pointers for its own collectives and for point-to-point;
  // our algorithms reduce on the host, so with them device buffers are staged.
  bool takes_device_buffers(const CollArgs&, Algo resolved) const override {
    return cuda_aware_ && resolved == Algo::native;
  }
  bool takes_device_p2p() const override { return cuda_aware_; }

  void run_native(const CollArgs& a) override;

  std::unique_ptr<Communicator> do_split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    int rc = MPI_Comm_split(p2p_, color < 0 ? MPI_UNDEFINED : color, key, &sub);
    if (rc != MPI_SUCCESS) throw CommError(context("split"), "MPI_Comm_split failed: " + mpi::error_string(rc));
    if (sub == MPI_COMM_NULL) return nullptr;
    auto out = std::make_unique<MpiCommunicator>(sub, options());
    MPI_Comm_free(&sub);
    return out;
  }

  void do_abort(const std::string&) override { aborted_flag_ = true; }

 private:
  static int comm_rank(MPI_Comm c) { int r = 0; MPI_Comm_rank(c, &r); return r; }
  static int comm_size(MPI_Comm c) { int s = 0; MPI_Comm_size(c, &s); return s; }

  WorkPtr post(bool is_send, const Buffer& buf, int peer, int64_t tag) {
    const char* op = is_send ? "send" : "recv";
    if (buf.bytes() > size_t(INT_MAX))
      throw UsageError(context(op, peer), "messages over 2 GiB are not supported by the mpi backend");
    // User tags go to the p2p communicator as they are; the collectives' tags (one per
    // collective, ever increasing) wrap into MPI's tag range on their own communicator.
    MPI_Comm comm = p2p_;
    int mtag;
    if (tag <= kMaxUserTag) {
      if (tag > tag_ub_) throw UsageError(context(op, peer), "tag " + std::to_string(tag) + " exceeds MPI_TAG_UB " + std::to_string(tag_ub_));
      mtag = static_cast<int>(tag);
    } else {
      comm = algo_;
      mtag = static_cast<int>((tag - kMaxUserTag - 1) % (int64_t(tag_ub_) + 1));
    }
    MPI_Request req;
    int rc = is_send ? MPI_Isend(buf.data, static_cast<int>(buf.bytes()), MPI_BYTE, peer, mtag, comm, &req)
                     : MPI_Irecv(buf.data, static_cast<int>(buf.bytes()), MPI_BYTE, peer, mtag, comm, &req);
    if (rc != MPI_SUCCESS) throw CommError(context(op, peer), mpi::error_string(rc));
    return std::make_shared<MpiWork>(req, context(op, peer), &aborted_flag_);
  }

  MPI_Comm p2p_ = MPI_COMM_NULL, algo_ = MPI_COMM_NULL, native_ = MPI_COMM_NULL;
  int tag_ub_ = 32767;
  bool cuda_aware_ = false;
  std::atomic<bool> aborted_flag_{false};
};

void MpiCommunicator::run_native(const CollArgs& a) {
  const ErrorContext ctx = context(std::string(coll_name(a.kind)) + "/native", -1, a.seq);
  MPI_Datatype t = MPI_BYTE;
  if (a.kind != CollKind::barrier) mpi_type(a.recv.dtype, &t);
  const MPI_Op op = mpi_op(a.op);
  const int n = size(), r = rank();
  const size_t esize = a.kind == CollKind::barrier ? 1 : dtype_size(a.recv.dtype);
  auto in_place_at = [&](const Buffer& big, const Buffer& small, int slot) {
    return static_cast<char*>(big.data) + size_t(slot) * small.count * esize == small.data;
  };
  std::vector<char> scratch;
  device::DeviceMemory device_scratch;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_SUCCESS;
  switch (a.kind) {
    case CollKind::allreduce: {
      const void* s = a.send.data == a.recv.data ? MPI_IN_PLACE : a.send.data;
      rc = MPI_Iallreduce(s, a.recv.data, int(a.recv.count), t, op, native_, &req);
      break;
    }
    case CollKind::reduce: {
      const void* s = (r == a.root && a.send.data == a.recv.data) ? MPI_IN_PLACE : a.send.data;
      rc = MPI_Ireduce(s, a.recv.data, int(a.send.count), t, op, a.root, native_, &req);
      break;
    }
    case CollKind::broadcast:
      rc = MPI_Ibcast(a.recv.data, int(a.recv.count), t, a.root, native_, &req);
      break;
    case CollKind::reduce_scatter: {
      // NCCL's in-place (recv inside send) is not MPI's: receive into scratch and copy.
      void* out = a.recv.data;
      if (in_place_at(a.send, a.recv, r)) {
        if (a.recv.device.is_cpu()) {
          scratch.resize(a.recv.bytes());
          out = scratch.data();
        } else {  // a CUDA-aware MPI: the scratch lives beside the data
          device_scratch = device::DeviceMemory(a.recv.device, a.recv.bytes());
          out = device_scratch.data();
        }
      }
      rc = MPI_Ireduce_scatter_block(a.send.data, out, int(a.recv.count), t, op, native_, &req);
      break;
    }
    case CollKind::allgather: {
      const void* s = in_place_at(a.recv, a.send, r) ? MPI_IN_PLACE : a.send.data;
      rc = MPI_Iallgather(s, int(a.send.count), t, a.recv.data, int(a.send.count), t, native_, &req);
      break;
    }
    case CollKind::gather: {
      const void* s = (r == a.root && in_place_at(a.recv, a.send, r)) ? MPI_IN_PLACE : a.send.data;
      rc = MPI_Igather(s, int(a.send.count), t, a.recv.data, int(a.send.count), t, a.root, native_, &req);
      break;
    }
    case CollKind::scatter: {
      void* d = (r == a.root && in_place_at(a.send, a.recv, r)) ? MPI_IN_PLACE : a.recv.data;
      rc = MPI_Iscatter(a.send.data, int(a.recv.count), t, d, int(a.recv.count), t, a.root, native_, &req);
      break;
    }
    case CollKind::alltoall: {
      int per = int(a.recv.count / n);
      rc = MPI_Ialltoall(a.send.data, per, t, a.recv.data, per, t, native_, &req);
      break;
    }
    case CollKind::barrier: rc = MPI_Ibarrier(native_, &req); break;
  }
  if (rc != MPI_SUCCESS) throw CommError(ctx, mpi::error_string(rc));
  mpi_wait(req, ctx, timeout(), &aborted_flag_);
  if (!scratch.empty()) std::memcpy(a.recv.data, scratch.data(), scratch.size());
  if (device_scratch.data()) device::copy(a.recv.data, device_scratch.data(), a.recv.bytes());
  if (a.op == ReduceOp::avg) {
    const bool has_result = a.kind == CollKind::allreduce || a.kind == CollKind::reduce_scatter ||
                            (a.kind == CollKind::reduce && r == a.root);
    if (has_result) device::divide_in_place(a.recv.device, a.recv.data, a.recv.count, a.recv.dtype, n);
  }
}

}  // namespace

std::unique_ptr<Communicator> create_mpi_communicator(CommOptions options) {
  mpi::ensure_initialized();
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, options);
}

std::unique_ptr<Communicator> create_mpi_group_communicator(const std::vector<int>& world_ranks, int tag,
                                                           CommOptions options) {
  mpi::ensure_initialized();
  int world = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  const ErrorContext ctx{me, world, "mpi", "new_group", -1, -1};
  bool member = false;
  for (int r : world_ranks) {
    if (r < 0 || r >= world)
      throw UsageError(ctx, "group member " + std::to_string(r) + " is not a rank of the MPI world of " + std::to_string(world));
    member |= r == me;
  }
  if (!member) throw UsageError(ctx, "this rank is not one of the group's members");
  MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, static_cast<int>(world_ranks.size()), world_ranks.data(), &group);
  MPI_Comm sub = MPI_COMM_NULL;
  // Only the members call this (MPI-3), unlike MPI_Comm_split over the whole world.
  const int rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &sub);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  if (rc != MPI_SUCCESS || sub == MPI_COMM_NULL)
    throw CommError(ctx, "MPI_Comm_create_group failed: " + mpi::error_string(rc));
  auto out = std::make_unique<MpiCommunicator>(sub, options);
  MPI_Comm_free(&sub);
  return out;
}

}  // namespace dpt
