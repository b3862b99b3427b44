#pragma once
// Our Store interface (comm/store/store.h) over PyTorch's c10d::Store, so that the tcp
// transport's rendezvous, mesh and shared-memory handshakes run in whatever store
// init_process_group made: TCPStore (env://, tcp://), FileStore (file://), each behind
// the PrefixStore of its process group. Timeouts and store failures become our
// TimeoutError / PeerError naming the keys, so the creator's error says which ranks
// never showed up.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "comm/error.h"
#include "comm/store/store.h"

namespace dpt::torch_plugin {

class C10dStoreAdapter : public Store {
 public:
  C10dStoreAdapter(c10::intrusive_ptr<c10d::Store> store, ErrorContext ctx);

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool check(const std::string& key) override;

 private:
  [[noreturn]] void fail(const std::string& what, const std::exception& e) const;
  c10::intrusive_ptr<c10d::Store> store_;
  ErrorContext ctx_;
};

}  // namespace dpt::torch_plugin
