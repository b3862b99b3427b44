#pragma once
// Device buffers on a transport that moves host memory only (the tcp backend, an MPI
// that is not CUDA-aware, and our ring/tree algorithms, which reduce on the host).
//
// Terms:
//   live buffer - a buffer this rank reads (input) or writes (output) in a collective:
//                 e.g. reduce's recv is live only at the root, broadcast's buffer is an
//                 input at the root and an output elsewhere.
//   host image  - the pinned host copy of a live device buffer. Images keep the in-place
//                 relations of the originals (allgather's send inside recv,
//                 reduce_scatter's recv inside send), so NCCL's in-place conventions hold
//                 on the host too.
//   segment     - COMM_STAGING_SEGMENT_BYTES of an element-wise collective (allreduce,
//                 reduce, broadcast). Segments are pipelined: the device-to-host copies of
//                 later segments and the host-to-device copies of earlier ones run on a
//                 copy stream while the collective works on the current segment. The
//                 other collectives move blocks per rank and are staged whole.
#include <functional>
#include <memory>

#include "comm/communicator.h"
#include "device/runtime.h"

namespace dpt::device {

// True if a live buffer of `a` (on this rank) is device memory.
bool has_device_buffer(const CollArgs& a, int rank);

// Bytes the staging paths of this process copied so far, device to host and host to
// device (what a trainer reports as PCIe traffic besides its own uploads/downloads).
struct StagedBytes {
  uint64_t to_host = 0, to_device = 0;
};
StagedBytes staged_bytes();

class DeviceStaging {
 public:
  DeviceStaging();
  ~DeviceStaging();
  // Runs `host_run` on host images of a's live device buffers and copies the outputs
  // back. `host_run` must behave as the collective does on host buffers (it may be
  // called once per segment, each call a complete collective on that segment).
  void run(const CollArgs& a, int rank, const std::function<void(const CollArgs&)>& host_run);

 private:
  void run_whole(const CollArgs& a, int rank, const std::function<void(const CollArgs&)>& host_run);
  void run_segmented(const CollArgs& a, int rank, const std::function<void(const CollArgs&)>& host_run);
  CopyStream& stream_for(const Device& d);

  Device device_{};
  std::unique_ptr<CopyStream> stream_;
  PinnedBuffer send_image_, recv_image_;
};

// Point-to-point on a device buffer through a host copy: the send copies to the host
// before `send` is issued; the receive copies to the device when the Work completes
// (test() or wait()). The returned Work keeps the host copy alive.
WorkPtr staged_isend(const Buffer& buf, const std::function<WorkPtr(const Buffer&)>& send);
WorkPtr staged_irecv(const Buffer& buf, const std::function<WorkPtr(const Buffer&)>& recv);

}  // namespace dpt::device
