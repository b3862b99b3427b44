#include "comm/device/staging.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "comm/launch/env.h"

namespace dpt::device {

namespace {
std::atomic<uint64_t> g_to_host{0}, g_to_device{0};
void count_to_host(size_t bytes) { g_to_host.fetch_add(bytes, std::memory_order_relaxed); }
void count_to_device(size_t bytes) { g_to_device.fetch_add(bytes, std::memory_order_relaxed); }
}  // namespace

StagedBytes staged_bytes() {
  return {g_to_host.load(std::memory_order_relaxed), g_to_device.load(std::memory_order_relaxed)};
}

namespace {

struct Liveness {
  bool send_in = false;   // send is read on this rank
  bool recv_out = false;  // recv is written on this rank
};

Liveness liveness(const CollArgs& a, int rank) {
  const bool root = rank == a.root;
  switch (a.kind) {
    case CollKind::barrier: return {false, false};
    case CollKind::broadcast: return {root, !root};
    case CollKind::reduce:
    case CollKind::gather: return {true, root};
    case CollKind::scatter: return {root, true};
    default: return {true, true};
  }
}

bool on_device(const Buffer& b) { return !b.device.is_cpu() && b.count > 0 && b.data != nullptr; }

bool inside(const Buffer& inner, const Buffer& outer) {
  auto i = static_cast<const char*>(inner.data), o = static_cast<const char*>(outer.data);
  return i >= o && i + inner.bytes() <= o + outer.bytes();
}

Buffer on_host(Buffer b, void* data) {
  b.data = data;
  b.device = Device{};
  return b;
}

// Host images of a's device buffers. send_image/recv_image hold the images; the returned
// args point at them (or at the original host buffers).
CollArgs host_images(const CollArgs& a, const Liveness& live, PinnedBuffer& send_image, PinnedBuffer& recv_image) {
  CollArgs h = a;
  const bool send_dev = on_device(a.send), recv_dev = on_device(a.recv);
  // In place: one image covers both (send inside recv: allreduce, allgather; recv
  // inside send: reduce_scatter, where recv may start at send's first byte).
  if (recv_dev && send_dev && inside(a.send, a.recv)) {
    char* r = recv_image.reserve(a.recv.bytes());
    h.recv = on_host(a.recv, r);
    h.send = on_host(a.send, r + (static_cast<char*>(a.send.data) - static_cast<char*>(a.recv.data)));
  } else if (recv_dev && send_dev && inside(a.recv, a.send)) {
    char* s = send_image.reserve(a.send.bytes());
    h.send = on_host(a.send, s);
    h.recv = on_host(a.recv, s + (static_cast<char*>(a.recv.data) - static_cast<char*>(a.send.data)));
  } else {
    if (send_dev && live.send_in) h.send = on_host(a.send, send_image.reserve(a.send.bytes()));
    if (recv_dev && live.recv_out) h.recv = on_host(a.recv, recv_image.reserve(a.recv.bytes()));
  }
  return h;
}

size_t staging_segment_bytes() {
  static const size_t v = [] {
    int64_t b = env::get_int(env::kStagingSegmentBytes);
    if (b < 4096) throw std::invalid_argument("COMM_STAGING_SEGMENT_BYTES must be at least 4096");
    return static_cast<size_t>(b);
  }();
  return v;
}

}  // namespace

bool has_device_buffer(const CollArgs& a, int rank) {
  Liveness live = liveness(a, rank);
  return (live.send_in && on_device(a.send)) || (live.recv_out && on_device(a.recv));
}

DeviceStaging::DeviceStaging() = default;
DeviceStaging::~DeviceStaging() = default;

CopyStream& DeviceStaging::stream_for(const Device& d) {
  if (!stream_ || d.kind != device_.kind || d.index != device_.index) {
    stream_.reset();
    set_current(d);
    stream_ = std::make_unique<CopyStream>(d);
    device_ = d;
  }
  return *stream_;
}

void DeviceStaging::run(const CollArgs& a, int rank, const std::function<void(const CollArgs&)>& host_run) {
  const bool elementwise =
      a.kind == CollKind::allreduce || a.kind == CollKind::reduce || a.kind == CollKind::broadcast;
  if (elementwise) run_segmented(a, rank, host_run);
  else run_whole(a, rank, host_run);
}

void DeviceStaging::run_whole(const CollArgs& a, int rank, const std::function<void(const CollArgs&)>& host_run) {
  const Liveness live = liveness(a, rank);
  const CollArgs h = host_images(a, live, send_image_, recv_image_);
  const Device& d = on_device(a.send) ? a.send.device : a.recv.device;
  CopyStream& s = stream_for(d);
  if (live.send_in && h.send.data != a.send.data) {
    s.copy_async(h.send.data, a.send.data, a.send.bytes());
    count_to_host(a.send.bytes());
  }
  // An in-place output whose input was not live (none today) would still need its old
  // contents; copying recv in when it aliases send is already covered above.
  s.synchronize();
  host_run(h);
  if (live.recv_out && h.recv.data != a.recv.data) {
    s.copy_async(a.recv.data, h.recv.data, a.recv.bytes());
    count_to_device(a.recv.bytes());
  }
  s.synchronize();
}

void DeviceStaging::run_segmented(const CollArgs& a, int rank,
                                  const std::function<void(const CollArgs&)>& host_run) {
  const Liveness live = liveness(a, rank);
  const CollArgs h = host_images(a, live, send_image_, recv_image_);
  const Device& d = on_device(a.send) ? a.send.device : a.recv.device;
  CopyStream& s = stream_for(d);
  const size_t n = a.send.count;
  const size_t esize = dtype_size(a.send.dtype);
  const size_t seg = std::max<size_t>(1, staging_segment_bytes() / esize);
  const bool copy_in = live.send_in && h.send.data != a.send.data;
  const bool copy_out = live.recv_out && h.recv.data != a.recv.data;

  std::vector<size_t> ready;
  for (size_t off = 0; off < n; off += seg) {
    const size_t m = std::min(seg, n - off);
    if (copy_in) {
      s.copy_async(h.send.slice(off, m).data, a.send.slice(off, m).data, m * esize);
      count_to_host(m * esize);
    }
    ready.push_back(s.mark());
  }
  size_t k = 0;
  for (size_t off = 0; off < n; off += seg, ++k) {
    const size_t m = std::min(seg, n - off);
    s.wait(ready[k]);
    CollArgs part = h;
    part.send = h.send.slice(off, m);
    // Outputs that are not live (reduce at a non-root) keep their (unused) view.
    part.recv = live.recv_out || a.kind == CollKind::broadcast ? h.recv.slice(off, m) : h.recv;
    if (a.kind == CollKind::broadcast) part.send = part.recv = h.send.slice(off, m);
    host_run(part);
    if (copy_out) {
      s.copy_async(a.recv.slice(off, m).data, h.recv.slice(off, m).data, m * esize);
      count_to_device(m * esize);
    }
  }
  s.synchronize();
}

// ---- point-to-point ----

namespace {

class StagedWork : public Work {
 public:
  StagedWork(WorkPtr inner, std::shared_ptr<std::vector<char>> image, std::function<void()> after)
      : inner_(std::move(inner)), image_(std::move(image)), after_(std::move(after)) {}
  bool test() override {
    if (!inner_->test()) return false;
    finish();
    return true;
  }
  void wait(Millis timeout) override {
    inner_->wait(timeout);
    finish();
  }

 private:
  void finish() {
    std::call_once(once_, [&] {
      try {
        if (after_) after_();
      } catch (...) {
        error_ = std::current_exception();
      }
    });
    if (error_) std::rethrow_exception(error_);
  }
  WorkPtr inner_;
  std::shared_ptr<std::vector<char>> image_;
  std::function<void()> after_;
  std::once_flag once_;
  std::exception_ptr error_;
};

}  // namespace

WorkPtr staged_isend(const Buffer& buf, const std::function<WorkPtr(const Buffer&)>& send) {
  auto image = std::make_shared<std::vector<char>>(buf.bytes());
  set_current(buf.device);
  copy(image->data(), buf.data, buf.bytes());
  count_to_host(buf.bytes());
  WorkPtr inner = send(on_host(buf, image->data()));
  return std::make_shared<StagedWork>(std::move(inner), std::move(image), nullptr);
}

WorkPtr staged_irecv(const Buffer& buf, const std::function<WorkPtr(const Buffer&)>& recv) {
  auto image = std::make_shared<std::vector<char>>(buf.bytes());
  WorkPtr inner = recv(on_host(buf, image->data()));
  char* host = image->data();
  Buffer dev = buf;
  return std::make_shared<StagedWork>(std::move(inner), std::move(image), [dev, host] {
    set_current(dev.device);
    copy(dev.data, host, dev.bytes());
    count_to_device(dev.bytes());
  });
}

}  // namespace dpt::device
