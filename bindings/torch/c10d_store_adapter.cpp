#include "bindings/torch/c10d_store_adapter.h"

namespace dpt::torch_plugin {

C10dStoreAdapter::C10dStoreAdapter(c10::intrusive_ptr<c10d::Store> store, ErrorContext ctx)
    : store_(std::move(store)), ctx_(std::move(ctx)) {
  ctx_.op = "rendezvous";
}

void C10dStoreAdapter::fail(const std::string& what, const std::exception& e) const {
  throw PeerError(ctx_, "PyTorch's store failed to " + what + ": " + e.what());
}

void C10dStoreAdapter::set(const std::string& key, const std::string& value) {
  try {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    fail("set '" + key + "'", e);
  }
}

std::string C10dStoreAdapter::get(const std::string& key, Millis timeout) {
  wait({key}, timeout);
  try {
    const std::vector<uint8_t> v = store_->get(key);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    fail("get '" + key + "'", e);
  }
}

int64_t C10dStoreAdapter::add(const std::string& key, int64_t delta) {
  try {
    return store_->add(key, delta);
  } catch (const std::exception& e) {
    fail("add to '" + key + "'", e);
  }
}

void C10dStoreAdapter::wait(const std::vector<std::string>& keys, Millis timeout) {
  try {
    store_->wait(keys, timeout);
    return;
  } catch (const std::exception& e) {
    // c10d reports a timeout as a generic error: ask which keys are still missing.
    std::string missing;
    for (const auto& k : keys) {
      bool present = false;
      try {
        present = store_->check({k});
      } catch (const std::exception&) {
        fail("wait for '" + k + "'", e);
      }
      if (!present) missing += (missing.empty() ? "" : ", ") + k;
    }
    if (missing.empty()) fail("wait", e);
    throw TimeoutError(ctx_, "after " + std::to_string(timeout.count() / 1000.0) +
                                 " s these keys are still missing from PyTorch's store: " + missing +
                                 " (a rank that never called init_process_group or new_group?)");
  }
}

bool C10dStoreAdapter::check(const std::string& key) {
  try {
    return store_->check({key});
  } catch (const std::exception& e) {
    fail("check '" + key + "'", e);
  }
}

}  // namespace dpt::torch_plugin
