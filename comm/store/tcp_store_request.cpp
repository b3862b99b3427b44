#include "comm/store/tcp_store_request.h"

#include <cstring>
#include <utility>

#include "comm/wire.h"

namespace dpt::store_proto {

Scan scan_auth_hello(std::string_view in) {
  Scan s;
  // Garbage (an HTTP request, random bytes) is recognized by its first 4 bytes.
  if (in.size() >= 4 && wire::load_u32(in.data()) != kAuthMagic) {
    s.kind = Scan::reject;
    s.reason = "not a dpt store client (bad handshake magic)";
  } else if (in.size() >= kAuthHelloBytes) {
    const auto flag = static_cast<unsigned char>(in[40]), cipher = static_cast<unsigned char>(in[41]);
    if (wire::load_u32(in.data() + 4) != kAuthVersion) {
      s.kind = Scan::reject;
      s.reason = "unsupported handshake version (another version of dpt?)";
    } else if (flag > 1 || (cipher != 1 && cipher != 2) || static_cast<unsigned char>(in[42]) > 1 || in[43] != 0) {
      s.kind = Scan::reject;
      s.reason = "malformed handshake (encryption flag or cipher)";
    } else {
      s.kind = Scan::complete;
      s.size = kAuthHelloBytes;
    }
  }
  return s;
}

std::string encode_auth_hello(const AuthHello& h) {
  std::string out;
  wire::put_u32(out, kAuthMagic);
  wire::put_u32(out, kAuthVersion);
  out.append(reinterpret_cast<const char*>(h.nonce.data()), h.nonce.size());
  out.push_back(h.encrypt ? 1 : 0);
  out.push_back(static_cast<char>(h.cipher));
  out.push_back(h.munge_bootstrap ? 1 : 0);
  out.push_back('\0');
  return out;
}

AuthHello decode_auth_hello(std::string_view in) {
  AuthHello h;
  std::memcpy(h.nonce.data(), in.data() + 8, h.nonce.size());
  h.encrypt = in[40] == 1;
  h.cipher = static_cast<uint8_t>(in[41]);
  h.munge_bootstrap = in[42] == 1;
  return h;
}

Scan scan_store_message(std::string_view in) {
  Scan s;
  if (in.size() < kHeaderBytes) return s;
  const uint32_t magic = wire::load_u32(in.data());
  const uint32_t len = wire::load_u32(in.data() + 4);
  if (magic != kMagic || len == 0 || len > kMaxBodyBytes) {
    s.kind = Scan::reject;
    s.reason = magic != kMagic ? "bad magic" : "bad message length " + std::to_string(len);
    return s;
  }
  s.size = kHeaderBytes + size_t{len};
  if (in.size() < s.size) return s;
  s.kind = Scan::complete;
  s.body = in.substr(kHeaderBytes, len);
  return s;
}

std::string store_message(std::string_view body) {
  std::string out;
  out.reserve(kHeaderBytes + body.size());
  wire::put_u32(out, kMagic);
  wire::put_u32(out, static_cast<uint32_t>(body.size()));
  out.append(body);
  return out;
}

// Every field, in order: cmd, key, value, delta, timeout_ms, keys.
StoreRequest StoreRequest::set(std::string key, std::string value) {
  return {kSet, std::move(key), std::move(value), 0, 0, {}};
}
StoreRequest StoreRequest::get(std::string key, uint32_t timeout_ms) {
  return {kGet, std::move(key), {}, 0, timeout_ms, {}};
}
StoreRequest StoreRequest::add(std::string key, int64_t delta) { return {kAdd, std::move(key), {}, delta, 0, {}}; }
StoreRequest StoreRequest::wait(std::vector<std::string> keys, uint32_t timeout_ms) {
  return {kWait, {}, {}, 0, timeout_ms, std::move(keys)};
}
StoreRequest StoreRequest::check(std::vector<std::string> keys) { return {kCheck, {}, {}, 0, 0, std::move(keys)}; }

StoreRequest decode_store_request(std::string_view body) {
  wire::Reader r(body);
  StoreRequest q;
  const uint8_t cmd = r.u8();
  switch (cmd) {
    case kSet:
      q.key = r.str(kMaxKeyBytes);
      q.value = r.str(kMaxValueBytes);
      break;
    case kAdd:
      q.key = r.str(kMaxKeyBytes);
      q.delta = r.i64();
      break;
    case kGet:
      q.timeout_ms = r.u32();
      q.key = r.str(kMaxKeyBytes);
      break;
    case kWait:
    case kCheck: {
      if (cmd == kWait) q.timeout_ms = r.u32();
      const uint32_t n = r.u32();
      if (n > kMaxKeys) throw wire::WireError("too many keys: " + std::to_string(n));
      for (uint32_t i = 0; i < n; ++i) q.keys.push_back(r.str(kMaxKeyBytes));
      break;
    }
    default:
      throw wire::WireError("unknown command " + std::to_string(cmd));
  }
  r.expect_end();
  q.cmd = static_cast<Cmd>(cmd);
  return q;
}

std::string encode_store_request(const StoreRequest& q) {
  std::string body;
  wire::put_u8(body, q.cmd);
  switch (q.cmd) {
    case kSet:
      wire::put_str(body, q.key);
      wire::put_str(body, q.value);
      break;
    case kAdd:
      wire::put_str(body, q.key);
      wire::put_i64(body, q.delta);
      break;
    case kGet:
      wire::put_u32(body, q.timeout_ms);
      wire::put_str(body, q.key);
      break;
    case kWait:
    case kCheck:
      if (q.cmd == kWait) wire::put_u32(body, q.timeout_ms);
      wire::put_u32(body, static_cast<uint32_t>(q.keys.size()));
      for (const auto& k : q.keys) wire::put_str(body, k);
      break;
  }
  return body;
}

}  // namespace dpt::store_proto
