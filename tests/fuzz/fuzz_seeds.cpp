// fuzz_seeds OUTDIR: writes valid inputs for each fuzz target into OUTDIR/<target>/, made
// with the repository's own encoders, so the fuzzers start from inputs that pass every
// check and mutate from there:
//   frame/       a data frame with its payload, a goodbye, an abort with its reason, three
//                frames back to back; a handshake (hello, ack, proof) for each role label.
//   store/       one message of each command (set, get, add, wait, check), all of them
//                back to back, and an auth hello.
//   checkpoint/  small files written by save_safetensors: a model-like set of tensors
//                with metadata, a scalar and an empty tensor, and a file with no tensors.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backends/tcp/frame.h"
#include "comm/store/job_token.h"
#include "comm/store/tcp_store_request.h"
#include "comm/wire.h"
#include "models/io/safetensors.h"
#include "tests/fuzz/fuzz_check.h"

namespace fs = std::filesystem;
using namespace dpt;

namespace {

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

std::string header(tcp::FrameType type, int64_t tag, const std::string& payload) {
  unsigned char h[tcp::kHeaderBytes];
  tcp::encode_header({type, tag, payload.size()}, h);
  return std::string(reinterpret_cast<const char*>(h), sizeof h) + payload;
}

std::string hello(tcp::HelloKind kind, int32_t rank) {
  tcp::Hello h{kind, rank, 4, 0x1234567890abcdefull, 7, {}};
  for (size_t i = 0; i < sizeof h.nonce; ++i) h.nonce[i] = static_cast<unsigned char>(i * 7 + rank);
  unsigned char out[tcp::kHelloBytes];
  tcp::encode_hello(h, out);
  return std::string(reinterpret_cast<const char*>(out), sizeof out);
}

void frame_seeds(const fs::path& dir) {
  const std::string data = header(tcp::FrameType::data, 42, "sixteen bytes...");
  const std::string goodbye = header(tcp::FrameType::goodbye, 0, "");
  const std::string abort = header(tcp::FrameType::abort, -1, "rank 2: out of memory");
  write_file(dir / "data", data);
  write_file(dir / "goodbye", goodbye);
  write_file(dir / "abort", abort);
  write_file(dir / "stream", data + abort + goodbye);
  const std::string transcript = hello(tcp::HelloKind::hello, 1) + hello(tcp::HelloKind::ack, 2);
  for (const char* label : {tcp::kAckProofLabel, tcp::kHelloProofLabel}) {
    crypto::Mac proof = handshake_proof(fuzz::kToken, label, transcript);
    write_file(dir / (std::string("handshake-") + label),
               transcript + std::string(reinterpret_cast<const char*>(proof.data()), proof.size()));
  }
}

void store_seeds(const fs::path& dir) {
  using store_proto::StoreRequest;
  const std::vector<std::pair<const char*, StoreRequest>> requests = {
      {"set", StoreRequest::set("rank/0/addr", "10.0.0.1:29500")},
      {"get", StoreRequest::get("rank/1/addr", 30000)},
      {"add", StoreRequest::add("barrier/3", 1)},
      {"wait", StoreRequest::wait({"a", "b", "mesh/2/ready"}, 5000)},
      {"check", StoreRequest::check({"a", "b"})},
  };
  std::string all;
  for (const auto& [name, req] : requests) {
    const std::string msg = store_proto::store_message(store_proto::encode_store_request(req));
    write_file(dir / name, msg);
    all += msg;
  }
  write_file(dir / "all", all);
  store_proto::AuthHello hello;
  hello.nonce.fill(0x5a);
  write_file(dir / "auth-hello", store_proto::encode_auth_hello(hello));
}

void checkpoint_seeds(const fs::path& dir) {
  std::vector<float> w(6), b(3), scalar{3.5f}, none;
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(i) - 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i);
  save_safetensors((dir / "model").string(), {{"fc1.weight", {2, 3}, w}, {"fc1.bias", {3}, b}},
                   {{"format", "pt"}, {"dpt.model", "mlp"}, {"step", "7"}});
  save_safetensors((dir / "scalar-and-empty").string(), {{"scale", {}, scalar}, {"unused", {0, 4}, none}});
  save_safetensors((dir / "no-tensors").string(), {}, {{"note", "metadata only"}});
  // 16-bit tensors as Hugging Face publishes them (our writer only writes F32): F16 with
  // a normal, a subnormal, an infinity and a NaN; BF16 with two values.
  const std::string header = R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},)"
                             R"("__metadata__":{"format":"pt"}})";
  std::string file(8, '\0');
  const uint64_t len = header.size();
  std::memcpy(file.data(), &len, 8);
  file += header;
  for (uint16_t v : {0x3c00, 0x0001, 0x7c00, 0x7e01, 0x3f80, 0xc040}) file.append(reinterpret_cast<const char*>(&v), 2);
  write_file(dir / "f16-bf16", file);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  for (const char* t : {"frame", "store", "checkpoint"}) fs::create_directories(out / t);
  frame_seeds(out / "frame");
  store_seeds(out / "store");
  checkpoint_seeds(out / "checkpoint");
  std::printf("fuzz_seeds: wrote seeds into %s\n", out.c_str());
  return 0;
}
