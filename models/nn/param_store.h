// ParamStore: every parameter and every gradient of a model lives in ONE contiguous
// flat float buffer (params_, grads_). A parameter is a named view into it:
//   offset = index of its first element in the flat buffer,
//   numel  = product of its shape.
// Parameters are registered in the order the model first uses them in forward, so
// the flat buffer runs input-to-output and gradients become final back-to-front:
// a DDP bucket or a ZeRO shard is a plain slice of these buffers.
//
// Two phases: add() while the layers are constructed, then finalize() allocates.
// After finalize() the buffers never move, so raw pointers into them stay valid.
//
// Both buffers carry kShardSlack zero elements past total_numel() (the *padding*),
// invisible through flat_params()/flat_grads(). ZeRO pads the flat buffer to a multiple
// of the world size N (at most N-1 extra elements) so every rank owns an equal shard and
// the parameter allgather runs in place; the slack lets it do so without reallocating
// (which would invalidate the layers' pointers). padded_*(n) hands out the first n.
//
// Buffers (BatchNorm's running statistics, PyTorch's register_buffer): module state
// that is not trained. They live in a third flat float buffer (flat_buffers()) with
// named views like the parameters', outside the gradients and the optimizer, so DDP
// can broadcast all of them in one call and checkpoints save them under their names.
// A *count* buffer (num_batches_tracked, int64 in PyTorch) is held as a float, exact
// up to 2^24, and written to files as I64.
//
// Sharded build (ZeRO-3): with set_resident_shard(r, N) before finalize(), the store
// keeps only rank r's shard of the flat parameter buffer resident, cut as ZeRO cuts it
// (parallel/shard_layout.h: S = ceil(P / N), rank r owns [r*S, (r+1)*S)). Each parameter is
// still written whole (initialised, loaded), then *sealed*: its CRC-32 is recorded and
// its elements outside the shard are released (models/kernels/cpu/page_memory.h), so a rank never
// holds more than its shard plus the one parameter being written, instead of the whole
// model. The *fingerprint* hashes every parameter's CRC in index order: ranks whose
// fingerprints agree built the same model, which ZeRO-3 checks instead of broadcasting
// rank 0's parameters (no rank holds them all). Unsharded stores seal nothing.
// Both flat buffers are LazyFloats: zero, and costing no RAM, until written.
//
// Lazily zeroed gradients: zeroing every gradient before each step is a full pass over
// them (a tenth of a small CNN's step on the CPU), and PyTorch's zero_grad(set_to_none=True)
// skips it the same way. mark_grads_zero() records every host gradient as *pending*
// zero without writing it. A pending gradient is written as zeros when first touched:
// grad(i) / grad_span(i) for that parameter, the bulk views (flat_grads, padded_grads)
// for all of them, except inside a backward pass (BackwardScope), where bulk readers
// (DDP's buckets) read only gradients already final, and the pending ones are still to
// be written. A layer that writes every element of a gradient takes it with claim_grad(i),
// which says whether it was pending: then the layer stores instead of adding (a GEMM with
// beta 0), and nothing zeroes it first.
//
// Device mirror (Module::to_cuda): the host buffers stay the authoritative copy that
// optimizers, DDP, ZeRO and checkpoints work on; a CUDA copy of both buffers is what
// the layers' CUDA paths read and accumulate into. Module moves values between them:
// a layer's parameters up before its forward, each gradient down when it is final.
//
// Device-resident (set_device_resident; DDP with its optimizer on the GPU): the device
// copies become the authoritative ones. Nothing moves in a step; the host copies are
// refreshed only when a host view is asked for: a parameter view downloads every
// parameter if a device step changed them since (device_params_updated), and a view that
// may write (non-const) has the device copy re-uploaded before its next use
// (sync_device_params); a gradient view downloads every gradient if the device ones
// changed since (device_grads_updated), and is for reading: host writes to gradients do
// not reach the device.
//
// Buffers on the device: with a device mirror, the buffers have one too, and whichever
// copy was written last is current. BatchNorm's CUDA path reads and updates the device
// copy (device_buffer, device_buffers_updated) in every training forward; a host view
// (buffer, flat_buffers: DDP's broadcast, checkpoints, the CPU path) downloads them first
// if the device copy is newer, and a view that may write has them re-uploaded before the
// next device_buffer. So a step's BatchNorm layers move nothing between host and device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "models/kernels/cuda/device_floats.h"
#include "models/kernels/cpu/lazy_floats.h"

namespace dpt {

struct ParamInfo {
  std::string name;            // stable dotted name, e.g. "blocks.2.attn.qkv.weight"
  std::vector<int64_t> shape;  // PyTorch layout: Linear weight is [out, in]
  size_t offset = 0;           // first element in the flat buffers
  size_t numel = 0;
  size_t index = 0;            // position in param_infos()
};

struct BufferInfo {
  std::string name;            // e.g. "layer1.0.bn1.running_var"
  std::vector<int64_t> shape;  // [] for a scalar
  size_t offset = 0;           // first element in flat_buffers()
  size_t numel = 0;
  size_t index = 0;            // position in buffer_infos()
  bool is_count = false;       // an integer counter (saved as I64)
};

class ParamStore {
 public:
  // Registers a parameter; returns its index. Only before finalize().
  size_t add(const std::string& name, std::vector<int64_t> shape);
  // Registers a buffer; returns its index. Only before finalize(). Names are unique
  // across parameters and buffers.
  size_t add_buffer(const std::string& name, std::vector<int64_t> shape, bool is_count = false);
  void finalize();
  bool finalized() const { return finalized_; }

  // Sharded build: before finalize(); world >= 1, 0 <= rank < world.
  void set_resident_shard(int rank, int world);
  bool sharded() const { return shard_world_ > 0; }
  // The flat element range [first, second) kept resident (the whole buffer when unsharded).
  std::pair<size_t, size_t> resident_range() const { return {keep_begin_, keep_end_}; }
  // After parameter `index` was written whole: records its CRC and releases its
  // elements outside the resident range. No-op when unsharded.
  void seal(size_t index);
  // seal() of every parameter (after a bulk load).
  void seal_all();
  // Hash of every parameter's CRC at its last seal, in index order (0 when unsharded).
  uint64_t fingerprint() const;

  float* buffer(size_t index) {
    host_buffers_for_write();
    return buffers_.data() + buffer_infos_[index].offset;
  }
  const float* buffer(size_t index) const {
    host_buffers_for_read();
    return buffers_.data() + buffer_infos_[index].offset;
  }
  std::span<float> flat_buffers() {
    host_buffers_for_write();
    return buffers_;
  }
  std::span<const float> flat_buffers() const {
    host_buffers_for_read();
    return buffers_;
  }
  const std::vector<BufferInfo>& buffer_infos() const { return buffer_infos_; }
  // Index of the buffer called `name`, or buffer_infos().size() when there is none.
  size_t find_buffer(const std::string& name) const;

  float* param(size_t index) {
    host_params_for_write();
    return params_.data() + infos_[index].offset;
  }
  const float* param(size_t index) const {
    host_params_for_read();
    return params_.data() + infos_[index].offset;
  }
  float* grad(size_t index) {
    host_grads_for_read();
    if (pending_count_ > 0) settle_grad(index);
    return grads_.data() + infos_[index].offset;
  }
  std::span<float> param_span(size_t index) { return {param(index), infos_[index].numel}; }
  std::span<float> grad_span(size_t index) { return {grad(index), infos_[index].numel}; }

  // Lazily zeroed gradients (above).
  void mark_grads_zero();
  // The gradient of `index` for a writer of all of its elements; was_zero: it was pending
  // (store, do not add). No longer pending either way.
  float* claim_grad(size_t index, bool& was_zero);
  // Writes a pending gradient as zeros (no-op otherwise); settle_grads: every one.
  void settle_grad(size_t index) const;
  void settle_grads() const;
  size_t pending_grads() const { return pending_count_; }
  // While one lives, bulk views leave pending gradients pending (Module::backward).
  class BackwardScope {
   public:
    explicit BackwardScope(ParamStore& s) : s_(s), previous_(s.in_backward_) { s.in_backward_ = true; }
    ~BackwardScope() { s_.in_backward_ = previous_; }
    BackwardScope(const BackwardScope&) = delete;
    BackwardScope& operator=(const BackwardScope&) = delete;

   private:
    ParamStore& s_;
    bool previous_;
  };

  std::span<float> flat_params() {
    host_params_for_write();
    return {params_.data(), total_};
  }
  std::span<const float> flat_params() const {
    host_params_for_read();
    return {params_.data(), total_};
  }
  std::span<float> flat_grads() {
    host_grads_for_read();
    settle_bulk();
    return {grads_.data(), total_};
  }
  std::span<const float> flat_grads() const {
    host_grads_for_read();
    settle_bulk();
    return {grads_.data(), total_};
  }
  // The first n elements including padding; n <= total_numel() + kShardSlack
  // (std::length_error otherwise).
  std::span<float> padded_params(size_t n);
  std::span<float> padded_grads(size_t n);
  // Bytes the buffers really hold (vector capacities, padding included).
  size_t param_bytes() const { return params_.allocated_bytes(); }
  size_t grad_bytes() const { return grads_.allocated_bytes(); }
  static constexpr size_t kShardSlack = 1023;  // ZeRO world sizes up to 1024
  const std::vector<ParamInfo>& infos() const { return infos_; }
  size_t total_numel() const { return total_; }
  // Index of the parameter called `name`, or infos().size() when there is none.
  size_t find(const std::string& name) const;

  // Allocates the device mirror on the current CUDA device (gradients zero; parameters
  // are uploaded by upload_params). Only after finalize().
  void attach_device();
  bool on_device() const { return device_params_.data() != nullptr; }
  float* device_param(size_t index) { return device_params_.data() + infos_[index].offset; }
  float* device_grad(size_t index) { return device_grads_.data() + infos_[index].offset; }
  // The parameter/gradient a layer computes with: the device copy when `cuda`.
  float* param_on(bool cuda, size_t index) { return cuda ? device_param(index) : param(index); }
  float* grad_on(bool cuda, size_t index) { return cuda ? device_grad(index) : grad(index); }
  float* device_flat_grads() { return device_grads_.data(); }
  float* device_flat_params() { return device_params_.data(); }
  // The device copy of buffer `index` (uploading every buffer first if a host view that
  // may write was handed out since); after a kernel wrote it, device_buffers_updated().
  float* device_buffer(size_t index);
  void device_buffers_updated() { host_buffers_stale_ = on_device(); }

  // Device-resident mode (above). On: every parameter goes up now and per-layer uploads
  // stop (Module); off: the host copies are brought up to date and become authoritative
  // again. Needs the device mirror.
  void set_device_resident(bool on);
  bool device_resident() const { return resident_; }
  // A device step changed the parameters / a backward or a device pass changed the
  // gradients: the host copies are stale until a host view asks.
  void device_params_updated() { host_params_stale_ = resident_; }
  void device_grads_updated() { host_grads_stale_ = resident_; }
  // Before the device copy is read (forward, a device step): uploads every parameter if a
  // host view that may write was handed out since the last upload.
  void sync_device_params();
  // Flat element range [begin, end) of the host parameters up to the device; the
  // range's device gradients down to the host; all device gradients to zero.
  void upload_params(size_t begin, size_t end);
  void download_grads(size_t begin, size_t end);
  // Bytes moved by upload_params and download_grads since the start (PCIe traffic of
  // the mirror, which trainers report per step).
  uint64_t uploaded_bytes() const { return uploaded_; }
  uint64_t downloaded_bytes() const { return downloaded_ + resident_downloaded_; }
  void zero_device_grads();
  size_t device_bytes() const {
    return device_params_.capacity_bytes() + device_grads_.capacity_bytes() + device_buffers_.capacity_bytes();
  }

 private:
  // Throws unless `name` is new and the store still takes registrations.
  void check_new_name(const std::string& name, const char* what) const;
  void host_params_for_read() const {
    if (host_params_stale_) download_params();
  }
  void host_params_for_write() {
    host_params_for_read();
    device_params_stale_ = resident_;
  }
  void host_grads_for_read() const {
    if (host_grads_stale_) download_all_grads();
  }
  void host_buffers_for_read() const {
    if (host_buffers_stale_) download_buffers();
  }
  void host_buffers_for_write() {
    host_buffers_for_read();
    device_buffers_stale_ = on_device();
  }
  void download_params() const;
  void download_all_grads() const;
  void download_buffers() const;
  void settle_bulk() const {
    if (pending_count_ > 0 && !in_backward_) settle_grads();
  }

  std::vector<ParamInfo> infos_;
  std::vector<BufferInfo> buffer_infos_;
  mutable std::vector<float> buffers_;  // mutable: a const view refreshes it (as params_)
  size_t buffer_total_ = 0;
  // Mutable: a const view of a device-resident store refreshes them from the device (what
  // a reader sees is the current value either way).
  mutable LazyFloats params_;  // on huge pages, committed on first write (models/kernels/cpu/lazy_floats.h)
  mutable LazyFloats grads_;
  int shard_rank_ = 0, shard_world_ = 0;  // sharded build; world 0: unsharded
  size_t keep_begin_ = 0, keep_end_ = 0;
  std::vector<uint32_t> crcs_;            // sharded: each parameter's CRC at its seal
  DeviceFloats device_params_, device_grads_, device_buffers_;
  mutable bool host_buffers_stale_ = false;  // the device buffers were written last
  bool device_buffers_stale_ = false;        // a writable host view was handed out since
  size_t total_ = 0;
  bool finalized_ = false;
  uint64_t uploaded_ = 0, downloaded_ = 0;
  // Pending-zero gradients, per parameter. Mutable: settling a pending gradient does not
  // change what any reader sees (zeros either way), so const views may do it.
  mutable std::vector<uint8_t> pending_;
  mutable size_t pending_count_ = 0;
  bool in_backward_ = false;
  bool resident_ = false;
  mutable bool host_params_stale_ = false, host_grads_stale_ = false;
  bool device_params_stale_ = false;
  mutable uint64_t resident_downloaded_ = 0;
};

}  // namespace dpt
