// Collectives and point-to-point on device buffers (cuda:N), checked against exact
// expected values after copying results back to the host. On a machine with a GPU this
// runs on real device memory (mpi and tcp stage through pinned host memory, nccl moves
// device memory itself); CI runs it with DPT_EMULATE_DEVICE=1, where host memory stands
// in for the device so the staging paths (segments, in-place images, copy-back, p2p) are
// exercised without a GPU. COMM_STAGING_SEGMENT_BYTES is set small by the test
// registration so that the larger counts span several pipelined segments.
#include <cstring>
#include <sstream>
#include <vector>

#include "device/runtime.h"
#include "tests/support/dist_test.h"
#include "tests/support/typed_values.h"

using namespace dpt;
using namespace dpt::test;

namespace {

Device gpu() {
  static const Device d = device::for_local_rank(world().rank());
  return d;
}

// A device allocation mirroring a host vector.
struct DeviceVec {
  device::DeviceMemory mem;
  size_t count;
  DType t;
  DeviceVec(const std::vector<char>& host, DType dt) : mem(gpu(), host.size()), count(host.size() / dtype_size(dt)), t(dt) {
    device::copy(mem.data(), host.data(), host.size());
  }
  Buffer buf() const { return Buffer{mem.data(), count, t, gpu()}; }
  Buffer slice(size_t off, size_t n) const { return buf().slice(off, n); }
  std::vector<char> host() const {
    std::vector<char> h(count * dtype_size(t));
    device::copy(h.data(), mem.data(), h.size());
    return h;
  }
};

std::vector<Algo> algos() {
  if (backend() == "nccl") return {Algo::native};
  std::vector<Algo> a = {Algo::ring, Algo::tree};
  if (backend() == "mpi") a.push_back(Algo::native);
  return a;
}
bool runs(Algo a, DType t) {
  return !(backend() == "mpi" && a == Algo::native && (t == DType::f16 || t == DType::bf16));
}

std::vector<size_t> counts(int n, DType t) {
  // 200 KiB spans several 64 KiB staging segments.
  return {0, 1, size_t(7 * n + 3), (size_t(200) << 10) / dtype_size(t) + 3};
}

std::vector<char> inputs(DType t, int r, ReduceOp op, size_t count, size_t offset = 0) {
  std::vector<char> v(count * dtype_size(t));
  for (size_t i = 0; i < count; ++i) store_value(t, v.data(), i, input_value(r, i + offset, op));
  return v;
}

}  // namespace

TEST_CASE("device allreduce: dtypes, ops, segmented sizes, in and out of place") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  for (Algo algo : algos()) {
    c.set_algo(algo);
    Failures f;
    for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8}) {
      if (!runs(algo, t)) continue;
      for (ReduceOp op : kAllReduceOps) {
        for (size_t count : counts(n, t)) {
          std::vector<char> want(count * dtype_size(t));
          for (size_t i = 0; i < count; ++i) store_expected(t, want.data(), i, i, n, op);
          for (bool in_place : {false, true}) {
            DeviceVec in(inputs(t, r, op, count), t);
            DeviceVec out(std::vector<char>(count * dtype_size(t), 0x5a), t);
            c.allreduce(in.buf(), in_place ? in.buf() : out.buf(), op);
            long bad = first_mismatch((in_place ? in : out).host(), want, t);
            if (bad >= 0)
              f.add(std::string(algo_name(algo)) + " " + dtype_name(t) + " " + reduce_op_name(op) + " count " +
                    std::to_string(count) + (in_place ? " in place" : "") + ": first wrong element " + std::to_string(bad));
          }
        }
      }
    }
    CHECK(all_ok(f.count == 0, f.msg.str()));
  }
  c.set_algo(Algo::automatic);
}

TEST_CASE("device reduce and broadcast from every root") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  for (Algo algo : algos()) {
    c.set_algo(algo);
    Failures f;
    for (DType t : {DType::f32, DType::bf16, DType::i64}) {
      if (!runs(algo, t)) continue;
      for (int root = 0; root < n; ++root) {
        for (size_t count : counts(n, t)) {
          std::vector<char> want(count * dtype_size(t));
          for (size_t i = 0; i < count; ++i) store_expected(t, want.data(), i, i, n, ReduceOp::avg);
          const std::vector<char> original = inputs(t, r, ReduceOp::avg, count);
          DeviceVec in(original, t);
          DeviceVec out(std::vector<char>(count * dtype_size(t), 0), t);
          c.reduce(in.buf(), out.buf(), ReduceOp::avg, root);
          if (r == root && first_mismatch(out.host(), want, t) >= 0)
            f.add(std::string("reduce ") + algo_name(algo) + " " + dtype_name(t) + " root " + std::to_string(root) +
                  " count " + std::to_string(count));
          if (in.host() != original) f.add("reduce modified the send buffer");
          const std::vector<char> root_values = inputs(t, root, ReduceOp::sum, count);
          DeviceVec b(r == root ? root_values : std::vector<char>(root_values.size(), 0), t);
          c.broadcast(b.buf(), root);
          if (first_mismatch(b.host(), root_values, t) >= 0)
            f.add(std::string("broadcast ") + algo_name(algo) + " " + dtype_name(t) + " root " + std::to_string(root) +
                  " count " + std::to_string(count));
        }
      }
    }
    CHECK(all_ok(f.count == 0, f.msg.str()));
  }
  c.set_algo(Algo::automatic);
}

TEST_CASE("device reduce_scatter and allgather, in place and out of place") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  Failures f;
  for (DType t : {DType::f32, DType::bf16, DType::i32}) {
    for (size_t per : {size_t(0), size_t(1), size_t(5), (size_t(100) << 10) / dtype_size(t) + 1}) {
      const size_t es = dtype_size(t);
      // reduce_scatter: my chunk of the sum.
      std::vector<char> want(per * es);
      for (size_t i = 0; i < per; ++i) store_expected(t, want.data(), i, size_t(r) * per + i, n, ReduceOp::sum);
      for (bool in_place : {false, true}) {
        DeviceVec send(inputs(t, r, ReduceOp::sum, per * n), t);
        DeviceVec out(std::vector<char>(per * es, 0), t);
        Buffer recv = in_place ? send.slice(size_t(r) * per, per) : out.buf();
        c.reduce_scatter(send.buf(), recv, ReduceOp::sum);
        std::vector<char> got = out.host();
        if (in_place) {
          const std::vector<char> h = send.host();
          got.assign(h.begin() + long(r * per * es), h.begin() + long((r + 1) * per * es));
        }
        if (first_mismatch(got, want, t) >= 0)
          f.add(std::string("reduce_scatter ") + dtype_name(t) + " per " + std::to_string(per) + (in_place ? " in place" : ""));
      }
      // allgather: every rank's inputs, in rank order.
      std::vector<char> all(per * n * es);
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < per; ++i) store_value(t, all.data(), size_t(q) * per + i, input_value(q, i, ReduceOp::sum));
      for (bool in_place : {false, true}) {
        const std::vector<char> mine = inputs(t, r, ReduceOp::sum, per);
        std::vector<char> recv_init(per * n * es, 0);
        if (in_place) std::memcpy(recv_init.data() + r * per * es, mine.data(), mine.size());
        DeviceVec recv(recv_init, t);
        DeviceVec send(mine, t);
        c.allgather(in_place ? recv.slice(size_t(r) * per, per) : send.buf(), recv.buf());
        if (first_mismatch(recv.host(), all, t) >= 0)
          f.add(std::string("allgather ") + dtype_name(t) + " per " + std::to_string(per) + (in_place ? " in place" : ""));
      }
    }
  }
  CHECK(all_ok(f.count == 0, f.msg.str()));
}

TEST_CASE("device gather, scatter and alltoall") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  Failures f;
  const DType t = DType::i64;
  const size_t per = 1000, es = dtype_size(t);
  for (int root = 0; root < n; ++root) {
    std::vector<char> all(per * n * es);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < per; ++i) store_value(t, all.data(), size_t(q) * per + i, input_value(q, i, ReduceOp::sum));
    DeviceVec send(inputs(t, r, ReduceOp::sum, per), t);
    DeviceVec recv(std::vector<char>(per * n * es, 0), t);
    c.gather(send.buf(), recv.buf(), root);
    if (r == root && first_mismatch(recv.host(), all, t) >= 0) f.add("gather root " + std::to_string(root));
    DeviceVec src(r == root ? all : std::vector<char>(all.size(), 0), t);
    DeviceVec mine(std::vector<char>(per * es, 0), t);
    c.scatter(src.buf(), mine.buf(), root);
    if (first_mismatch(mine.host(), inputs(t, r, ReduceOp::sum, per), t) >= 0) f.add("scatter root " + std::to_string(root));
  }
  // alltoall: block q of rank r's send holds r*1000+q; block q received comes from rank q.
  std::vector<char> a2a_send(per * n * es), a2a_want(per * n * es);
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < per; ++i) {
      store_value(t, a2a_send.data(), size_t(q) * per + i, double(r * 1000 + q) + double(i));
      store_value(t, a2a_want.data(), size_t(q) * per + i, double(q * 1000 + r) + double(i));
    }
  DeviceVec s(a2a_send, t), d(std::vector<char>(a2a_send.size(), 0), t);
  c.alltoall(s.buf(), d.buf());
  if (first_mismatch(d.host(), a2a_want, t) >= 0) f.add("alltoall");
  CHECK(all_ok(f.count == 0, f.msg.str()));
}

TEST_CASE("device point-to-point around the ring") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  if (n < 2) return;
  const DType t = DType::f32;
  const size_t count = (size_t(300) << 10) / 4;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  DeviceVec out(inputs(t, r, ReduceOp::sum, count), t);
  DeviceVec in(std::vector<char>(count * 4, 0), t);
  // Even ranks send first, odd ranks receive first: correct on every backend, NCCL
  // included (it matches a pair's operations in issue order).
  if (r % 2 == 0) {
    auto s = c.isend(out.buf(), next, 7);
    auto q = c.irecv(in.buf(), prev, 7);
    s->wait();
    q->wait();
  } else {
    auto q = c.irecv(in.buf(), prev, 7);
    auto s = c.isend(out.buf(), next, 7);
    q->wait();
    s->wait();
  }
  CHECK(all_ok(first_mismatch(in.host(), inputs(t, prev, ReduceOp::sum, count), t) < 0, "ring exchange of device buffers"));
}

TEST_CASE("a host buffer and a device buffer in one collective are staged alike") {
  Communicator& c = world();
  if (backend() == "nccl") return;  // nccl takes both on the device or both on the host
  const int n = c.size(), r = c.rank();
  const size_t count = 1000;
  std::vector<char> want(count * 4);
  for (size_t i = 0; i < count; ++i) store_expected(DType::f32, want.data(), i, i, n, ReduceOp::sum);
  std::vector<char> host_in = inputs(DType::f32, r, ReduceOp::sum, count);
  DeviceVec out(std::vector<char>(count * 4, 0), DType::f32);
  c.allreduce(Buffer{host_in.data(), count, DType::f32, {}}, out.buf(), ReduceOp::sum);
  CHECK(all_ok(first_mismatch(out.host(), want, DType::f32) < 0, "host send, device recv"));
}
