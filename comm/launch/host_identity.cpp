#include "comm/launch/host_identity.h"

#include <unistd.h>

#include <fstream>

namespace dpt {

std::string local_host_id() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  char net[128] = {0};
  ssize_t len = ::readlink("/proc/self/ns/net", net, sizeof net - 1);
  return std::string(host) + "|" + boot + "|" + (len > 0 ? std::string(net, size_t(len)) : "");
}

uint64_t host_id_digest(const std::string& id) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : id) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace dpt
