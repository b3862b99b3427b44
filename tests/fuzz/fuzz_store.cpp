// Fuzz target: the TCP store's framing and request decoding (comm/tcp_store_request.h),
// the functions TcpStoreServer runs on every byte a client sends.
//
// Terms:
//   input    - the fuzzer's bytes, read three ways: as a connection's first bytes (the
//              auth hello, scan_auth_hello), as one message body (decode_store_request),
//              and as the stream of an authenticated connection, which is scanned and
//              decoded message by message as TcpStoreServer::parse_requests does.
//   outcome  - what the server makes of a stream: the list of decoded requests (each
//              re-encoded), ended by a rejection (bad header, malformed body: the server
//              closes the connection) or by bytes still waiting for more.
// Checks, for every input:
//   - a scan's verdict never changes as more bytes arrive: on every prefix it is
//     need_more or the verdict on the whole input (so a bad header is rejected from its
//     first bytes, before any body is buffered);
//   - a complete message takes 8 + its length bytes, and its body, 1 to kMaxBodyBytes
//     bytes, is the bytes right after the header;
//   - decode_store_request throws wire::WireError, or returns a request within the
//     protocol's limits that encode_store_request turns back into exactly the body;
//   - the outcome is the same when the stream arrives all at once and one byte at a time;
//   - no read past the input (ASan), no undefined behaviour (UBSan), no other exception.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/store/tcp_store_request.h"
#include "comm/wire.h"
#include "tests/fuzz/fuzz_check.h"

using namespace dpt;
using namespace dpt::store_proto;

namespace {

// Same verdict, taking the same bytes; bodies compared by their place in each input.
bool same(const Scan& a, std::string_view in_a, const Scan& b, std::string_view in_b) {
  auto offset = [](const Scan& s, std::string_view in) { return s.body.empty() ? 0 : s.body.data() - in.data(); };
  return a.kind == b.kind && a.size == b.size && a.reason == b.reason && a.body.size() == b.body.size() &&
         offset(a, in_a) == offset(b, in_b);
}

// The verdict on `in` is the one on every prefix (up to `upto` bytes) that is not
// need_more. Each prefix is scanned in a buffer of exactly its size, so that ASan sees a
// read past it.
template <typename ScanFn>
void check_prefixes(std::string_view in, size_t upto, ScanFn scan) {
  const Scan whole = scan(in);
  for (size_t n = 0; n < upto && n < in.size(); ++n) {
    const std::vector<char> copy(in.begin(), in.begin() + static_cast<long>(n));
    const std::string_view prefix(copy.data(), n);
    const Scan part = scan(prefix);
    FUZZ_CHECK(part.kind == Scan::need_more || same(part, prefix, whole, in),
               "a scan's verdict never changes with more bytes");
  }
}

void check_auth_hello(std::string_view in) {
  check_prefixes(in, kAuthHelloBytes, scan_auth_hello);
  const Scan s = scan_auth_hello(in);
  if (s.kind == Scan::complete) FUZZ_CHECK(s.size == kAuthHelloBytes, "an auth hello takes kAuthHelloBytes");
  if (s.kind == Scan::reject) FUZZ_CHECK(!s.reason.empty(), "a rejection says why");
  if (s.kind == Scan::need_more) FUZZ_CHECK(in.size() < kAuthHelloBytes, "need_more only before the hello is in");
}

// Decodes one body and checks the request; the re-encoded request, or "" when rejected.
std::string decode_and_check(std::string_view body, std::string* error) {
  StoreRequest q;
  try {
    q = decode_store_request(body);
  } catch (const wire::WireError& e) {
    *error = e.what();
    FUZZ_CHECK(!error->empty(), "a rejection says why");
    return "";
  }
  FUZZ_CHECK(q.cmd >= kSet && q.cmd <= kCheck, "a decoded command is a known one");
  FUZZ_CHECK(q.key.size() <= kMaxKeyBytes && q.value.size() <= kMaxValueBytes && q.keys.size() <= kMaxKeys,
             "a decoded request is within the protocol's limits");
  for (const auto& k : q.keys) FUZZ_CHECK(k.size() <= kMaxKeyBytes, "every key of a wait/check is within the limit");
  std::string again = encode_store_request(q);
  FUZZ_CHECK(again == body, "a decoded request re-encodes to the same body");
  return again;
}

void check_message_scan(std::string_view in, const Scan& s) {
  if (s.kind == Scan::complete) {
    FUZZ_CHECK(s.body.size() >= 1 && s.body.size() <= kMaxBodyBytes, "a body is 1 to kMaxBodyBytes bytes");
    FUZZ_CHECK(s.size == kHeaderBytes + s.body.size() && s.size <= in.size(), "a message takes 8 + length bytes");
    FUZZ_CHECK(s.body.data() == in.data() + kHeaderBytes, "the body follows the header");
    FUZZ_CHECK(wire::load_u32(in.data() + 4) == s.body.size(), "the body is as long as the header says");
  } else if (s.kind == Scan::need_more) {
    FUZZ_CHECK(in.size() < kHeaderBytes || (s.size > in.size() && s.size <= kHeaderBytes + kMaxBodyBytes),
               "need_more only while the message is not all in, and then says how much it needs");
  } else {
    FUZZ_CHECK(in.size() >= kHeaderBytes && !s.reason.empty(), "a rejection needs the header and says why");
  }
}

// The server's loop over a connection's bytes arriving `chunk` at a time.
std::vector<std::string> outcome(std::string_view stream, size_t chunk) {
  std::vector<std::string> out;
  std::string in;  // the connection's buffer, as Client::in
  for (size_t at = 0; at < stream.size();) {
    const size_t n = std::min(chunk, stream.size() - at);
    in.append(stream.substr(at, n));
    at += n;
    size_t pos = 0;
    for (;;) {
      const std::string_view rest = std::string_view(in).substr(pos);
      const Scan s = scan_store_message(rest);
      check_message_scan(rest, s);
      if (s.kind == Scan::need_more) break;
      if (s.kind == Scan::reject) {
        out.push_back("rejected: " + s.reason);
        return out;
      }
      std::string error;
      std::string req = decode_and_check(s.body, &error);
      if (!error.empty()) {
        out.push_back("malformed: " + error);
        return out;
      }
      out.push_back(std::move(req));
      pos += s.size;
    }
    in.erase(0, pos);
  }
  out.push_back("waiting with " + std::to_string(in.size()) + " bytes");
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  check_auth_hello(in);
  check_prefixes(in, kHeaderBytes, scan_store_message);
  std::string error;
  decode_and_check(in, &error);
  FUZZ_CHECK(outcome(in, 1) == outcome(in, size), "the same outcome whether bytes arrive one by one or at once");
  return 0;
}
