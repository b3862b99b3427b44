#pragma once
// The TCP store's message framing and request decoding (comm/tcp_store_protocol.h),
// apart from the server's state: pure functions over bytes, which the server and the
// client call and the fuzz target tests/fuzz/fuzz_store exercises directly.
//
// Terms:
//   input   - bytes a connection has received and the server has not consumed yet.
//   scan    - a look at the front of the input: need more bytes, one complete piece
//             (an auth hello, or a message's header and body), or a rejection decided
//             from the first bytes alone, before any body is buffered.
//   request - a body decoded and validated completely (every field, the limits on keys,
//             values and key counts, no trailing bytes) before the server touches any
//             state with it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/net/hmac.h"
#include "comm/store/tcp_store_protocol.h"

namespace dpt::store_proto {

struct Scan {
  enum Kind { need_more, complete, reject };
  Kind kind = need_more;
  size_t size = 0;        // complete: bytes it takes at the front of the input; need_more:
                          // bytes it will take, once a message header is in (else 0)
  std::string_view body;  // complete message: its body, a view into the input
  std::string reason;     // reject: why, for the log
};

// An auth hello (the client's, or the server's on the client side): rejects a wrong magic
// as soon as 4 bytes are in, then a wrong version or malformed flags; complete once
// kAuthHelloBytes are in.
Scan scan_auth_hello(std::string_view input);
// The hello's fields (either side's); decode only what scan_auth_hello found complete.
struct AuthHello {
  crypto::Nonce nonce{};
  bool encrypt = true;
  uint8_t cipher = 1;  // crypto::Cipher
  bool munge_bootstrap = false;  // client: asks for the token as a munge credential
};
std::string encode_auth_hello(const AuthHello& h);
AuthHello decode_auth_hello(std::string_view input);

// One message: rejects a bad magic or a body length of 0 or above kMaxBodyBytes as soon
// as the 8 header bytes are in; complete once the whole body is in.
Scan scan_store_message(std::string_view input);
// Header + body.
std::string store_message(std::string_view body);

struct StoreRequest {
  Cmd cmd = kSet;
  std::string key;                // set, get, add
  std::string value;              // set
  int64_t delta = 0;              // add
  uint32_t timeout_ms = 0;        // get, wait
  std::vector<std::string> keys;  // wait, check

  static StoreRequest set(std::string key, std::string value);
  static StoreRequest get(std::string key, uint32_t timeout_ms);
  static StoreRequest add(std::string key, int64_t delta);
  static StoreRequest wait(std::vector<std::string> keys, uint32_t timeout_ms);
  static StoreRequest check(std::vector<std::string> keys);
};

// Throws wire::WireError for an unknown command, a truncated field, a key, value or key
// count over its limit, or trailing bytes.
StoreRequest decode_store_request(std::string_view body);
// The body of `r`, only the fields its command uses; decode_store_request inverts it.
std::string encode_store_request(const StoreRequest& r);

}  // namespace dpt::store_proto
