#pragma once
// What a finished handshake turns into: the records' keys and settings for one
// connection (record_stream.h), and the rule for when to encrypt.
//
// Terms:
//   COMM_TCP_ENCRYPT - "auto" (default): encrypt unless the connection runs over
//                      loopback (both ends in this host's kernel, where anyone who could
//                      read it could read the ranks' memory too); "1": always; "0":
//                      authenticate only (the bytes in clear, every record's tag checked).
//                      Either side asking is enough: a connection is encrypted when one
//                      end's rule says so.
#include <memory>
#include <string>
#include <string_view>

#include "comm/net/record_stream.h"

namespace dpt::net {

// This side's wish for the connection on `fd` (COMM_TCP_ENCRYPT; throws
// std::invalid_argument naming the variable for another value).
bool wants_encryption(int fd);
// "local -> remote" endpoints of a connected socket, for errors.
std::string connection_name(int fd);

struct SessionParams {
  std::string_view secret;      // the job token
  std::string_view transcript;  // every handshake byte both sides sent (both nonces)
  std::string_view dial_label;  // key label of the dialing side's direction
  std::string_view accept_label;
  bool dialing = false;         // this side dialed
  bool encrypt = true;          // agreed: either side's wish
  crypto::Cipher cipher = crypto::Cipher::aes256_gcm;  // agreed: agree_cipher()
};
std::shared_ptr<const SecureSession> make_session(const SessionParams& p, int fd);

}  // namespace dpt::net
