#include "comm/store/store_gather.h"

#include <numeric>

namespace dpt {

namespace {

// "<length>:<bytes>" per value: a value may hold any byte (a separator could not).
std::string encode(const std::vector<std::string>& values) {
  std::string out;
  for (const auto& v : values) out += std::to_string(v.size()) + ":" + v;
  return out;
}

std::vector<std::string> decode(const std::string& all, size_t count, const std::string& key, const ErrorContext& ctx) {
  std::vector<std::string> out;
  out.reserve(count);
  size_t at = 0;
  while (out.size() < count) {
    const size_t colon = all.find(':', at);
    size_t len = 0;
    bool ok = colon != std::string::npos && colon > at && colon - at <= 12;
    for (size_t i = at; ok && i < colon; ++i) {
      ok = all[i] >= '0' && all[i] <= '9';
      len = len * 10 + size_t(all[i] - '0');
    }
    if (!ok || all.size() - colon - 1 < len) break;
    out.push_back(all.substr(colon + 1, len));
    at = colon + 1 + len;
  }
  if (out.size() != count || at != all.size())
    throw MismatchError(ctx, "the store's key " + key + " does not hold " + std::to_string(count) +
                                 " values: another version of dpt in this job?");
  return out;
}

}  // namespace

std::vector<std::string> gather_through_store(Store& store, const std::string& key, const std::vector<int>& members,
                                              int me, const std::string& value, Millis timeout,
                                              const ErrorContext& ctx) {
  const std::string all_key = key + "/all";
  if (members.empty() || members.front() != me) {
    store.set(key + "/" + std::to_string(me), value);
    return decode(store.get(all_key, timeout), members.size(), all_key, ctx);
  }
  std::vector<std::string> values;
  values.reserve(members.size());
  for (int m : members) values.push_back(m == me ? value : store.get(key + "/" + std::to_string(m), timeout));
  store.set(all_key, encode(values));
  return values;
}

std::vector<std::string> gather_through_store(Store& store, const std::string& key, int world, int me,
                                              const std::string& value, Millis timeout, const ErrorContext& ctx) {
  std::vector<int> members(size_t(world > 0 ? world : 0));
  std::iota(members.begin(), members.end(), 0);
  return gather_through_store(store, key, members, me, value, timeout, ctx);
}

}  // namespace dpt
