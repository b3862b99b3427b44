#include "backends/tcp/frame.h"

#include <cstring>

#include <fmt/format.h>

#include "comm/wire.h"

namespace dpt::tcp {

// Layout (little-endian):
//   header: u32 magic | u16 version | u16 type | i64 tag | u64 length
//   hello:  u32 magic | u16 version | u16 kind | i32 rank | i32 world | u64 job | u64 comm
//           | u8[32] nonce
static void put_u16(unsigned char* p, uint16_t v) {
  p[0] = static_cast<unsigned char>(v & 0xff);
  p[1] = static_cast<unsigned char>(v >> 8);
}
static uint16_t get_u16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

void encode_header(const FrameHeader& h, unsigned char out[kHeaderBytes]) {
  wire::store_u32(out, kFrameMagic);
  put_u16(out + 4, kProtocolVersion);
  put_u16(out + 6, static_cast<uint16_t>(h.type));
  wire::store_u64(out + 8, static_cast<uint64_t>(h.tag));
  wire::store_u64(out + 16, h.length);
}

FrameHeader decode_header(const unsigned char in[kHeaderBytes], uint64_t max_length) {
  uint32_t magic = wire::load_u32(in);
  if (magic != kFrameMagic)
    throw FrameError(fmt::format("bad frame magic 0x{:08x} (expected 0x{:08x}): not a dpt peer, or the stream is out of step",
                                 magic, kFrameMagic));
  uint16_t version = get_u16(in + 4);
  if (version != kProtocolVersion)
    throw FrameError(fmt::format("frame protocol version {} (this build speaks {}): mixed dpt versions?", version,
                                 kProtocolVersion));
  FrameHeader h;
  uint16_t type = get_u16(in + 6);
  h.tag = static_cast<int64_t>(wire::load_u64(in + 8));
  h.length = wire::load_u64(in + 16);
  switch (type) {
    case static_cast<uint16_t>(FrameType::data):
      if (h.length > max_length)
        throw FrameError(fmt::format("frame of {} bytes (tag {}) exceeds COMM_MAX_FRAME_BYTES={}", h.length, h.tag,
                                     max_length));
      break;
    case static_cast<uint16_t>(FrameType::goodbye):
      if (h.length != 0) throw FrameError(fmt::format("goodbye frame with a {}-byte payload", h.length));
      break;
    case static_cast<uint16_t>(FrameType::abort):
      if (h.length > kMaxAbortReason)
        throw FrameError(fmt::format("abort frame with a {}-byte reason (limit {})", h.length, kMaxAbortReason));
      break;
    default:
      throw FrameError(fmt::format("unknown frame type {}", type));
  }
  h.type = static_cast<FrameType>(type);
  return h;
}

void encode_hello(const Hello& h, unsigned char out[kHelloBytes]) {
  wire::store_u32(out, kHelloMagic);
  put_u16(out + 4, kProtocolVersion);
  put_u16(out + 6, static_cast<uint16_t>(h.kind));
  wire::store_u32(out + 8, static_cast<uint32_t>(h.rank));
  wire::store_u32(out + 12, static_cast<uint32_t>(h.world));
  wire::store_u64(out + 16, h.job_id);
  wire::store_u64(out + 24, h.comm_id);
  std::memcpy(out + 32, h.nonce, sizeof h.nonce);
  out[64] = h.encrypt ? 1 : 0;
  out[65] = h.cipher;
  std::memset(out + 66, 0, kHelloBytes - 66);
}

Hello decode_hello(const unsigned char in[kHelloBytes]) {
  uint32_t magic = wire::load_u32(in);
  if (magic != kHelloMagic) throw FrameError(fmt::format("bad hello magic 0x{:08x}: not a dpt peer", magic));
  uint16_t version = get_u16(in + 4);
  if (version != kProtocolVersion)
    throw FrameError(fmt::format("hello protocol version {} (this build speaks {})", version, kProtocolVersion));
  uint16_t kind = get_u16(in + 6);
  if (kind != static_cast<uint16_t>(HelloKind::hello) && kind != static_cast<uint16_t>(HelloKind::ack))
    throw FrameError(fmt::format("unknown hello kind {}", kind));
  Hello h;
  h.kind = static_cast<HelloKind>(kind);
  h.rank = static_cast<int32_t>(wire::load_u32(in + 8));
  h.world = static_cast<int32_t>(wire::load_u32(in + 12));
  h.job_id = wire::load_u64(in + 16);
  h.comm_id = wire::load_u64(in + 24);
  std::memcpy(h.nonce, in + 32, sizeof h.nonce);
  if (in[64] > 1) throw FrameError(fmt::format("hello encryption flag {} (0 or 1)", in[64]));
  if (in[65] != 1 && in[65] != 2) throw FrameError(fmt::format("hello names unknown cipher {}", in[65]));
  for (size_t i = 66; i < kHelloBytes; ++i)
    if (in[i] != 0) throw FrameError(fmt::format("hello byte {} is reserved (0) but holds {}", i, in[i]));
  h.encrypt = in[64] == 1;
  h.cipher = in[65];
  return h;
}

}  // namespace dpt::tcp
