#pragma once
// A key-value store for rendezvous: ranks publish addresses, wait for each other and
// count arrivals. Values are byte strings. Every blocking call has a timeout and its
// error says which keys (and so which ranks) never showed up.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/work.h"

namespace dpt {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until `key` exists (or throws TimeoutError naming it).
  virtual std::string get(const std::string& key, Millis timeout) = 0;
  // Atomically adds `delta` to the integer at `key` (missing = 0); returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Blocks until every key exists; the TimeoutError lists the missing ones.
  virtual void wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  // True if the key exists now (no waiting).
  virtual bool check(const std::string& key) = 0;
};

}  // namespace dpt
