#include "comm/net/shm_names.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

namespace dpt {
namespace {

constexpr const char* kPrefix = "dpt-";

uint64_t pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? uint64_t(st.st_ino) : 0;
}

// A process's state letter and start time from /proc/<pid>/stat; false when it is gone.
// The command name (in parentheses) may hold spaces, so fields are counted after ')'.
bool process_stat(long pid, char& state, uint64_t& start) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string all;
  if (!std::getline(f, all)) return false;
  const auto paren = all.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream rest(all.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3) state = field.empty() ? '?' : field[0];
    if (i == 22) {
      start = std::stoull(field);
      return true;
    }
  }
  return false;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// "<ns>.<pid>.<start>" at the front of a name's rest; false when it is not one.
bool parse_owner(const std::string& rest, uint64_t& ns, long& pid, uint64_t& start) {
  const auto dash = rest.find('-');
  std::istringstream tag(rest.substr(0, dash));
  std::string a, b, c;
  if (dash == std::string::npos || !std::getline(tag, a, '.') || !std::getline(tag, b, '.') || !std::getline(tag, c) ||
      !all_digits(a) || !all_digits(b) || !all_digits(c))
    return false;
  ns = std::stoull(a);
  pid = std::stol(b);
  start = std::stoull(c);
  return true;
}

bool legacy_name(const std::string& rest) {
  if (rest.size() < 17 || rest[16] != '-') return false;
  for (int i = 0; i < 16; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(rest[size_t(i)]))) return false;
  return true;
}

// Every /dev/shm object some process of ours maps (mapped names read "/dev/shm/<name>").
std::set<std::string> mapped_names(const std::string& dir) {
  std::set<std::string> out;
  DIR* proc = ::opendir("/proc");
  if (!proc) return out;
  const std::string marker = dir + "/" + kPrefix;
  while (dirent* e = ::readdir(proc)) {
    if (!all_digits(e->d_name)) continue;
    std::ifstream maps(std::string("/proc/") + e->d_name + "/maps");
    for (std::string line; std::getline(maps, line);) {
      const auto at = line.find(marker);
      if (at == std::string::npos) continue;
      std::string name = line.substr(at + dir.size() + 1);
      if (const auto sp = name.find(' '); sp != std::string::npos) name.resize(sp);  // " (deleted)"
      out.insert(name);
    }
  }
  ::closedir(proc);
  return out;
}

}  // namespace

const std::string& shm_owner_tag() {
  static const std::string tag = [] {
    char state = '?';
    uint64_t start = 0;
    process_stat(long(::getpid()), state, start);
    return std::to_string(pid_namespace()) + "." + std::to_string(::getpid()) + "." + std::to_string(start);
  }();
  return tag;
}

std::string shm_object_name(const std::string& what) { return std::string("/") + kPrefix + shm_owner_tag() + "-" + what; }

ShmReclaim reclaim_dead_shm(bool legacy_unmapped, const std::string& dir) {
  ShmReclaim r;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return r;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind(kPrefix, 0) == 0) names.push_back(n);
  }
  ::closedir(d);
  const uint64_t my_ns = pid_namespace();
  std::set<std::string> mapped;
  bool mapped_read = false;
  for (const std::string& n : names) {
    const std::string rest = n.substr(4);
    uint64_t ns = 0, start = 0;
    long pid = 0;
    bool dead = false;
    if (parse_owner(rest, ns, pid, start)) {
      if (ns != my_ns) {
        ++r.foreign;
        continue;
      }
      char state = '?';
      uint64_t now_start = 0;
      dead = !process_stat(pid, state, now_start) || state == 'Z' || state == 'X' || now_start != start;
    } else if (legacy_unmapped && legacy_name(rest)) {
      if (!mapped_read) mapped = mapped_names(dir), mapped_read = true;
      dead = mapped.count(n) == 0;
    } else {
      continue;  // not ours to judge
    }
    if (!dead) {
      ++r.live;
      continue;
    }
    struct stat st {};
    const bool sized = ::stat((dir + "/" + n).c_str(), &st) == 0;
    if (::unlink((dir + "/" + n).c_str()) != 0) {
      ++r.live;
      continue;
    }
    r.removed.push_back(n);
    if (sized) r.removed_bytes += uint64_t(st.st_blocks) * 512;
  }
  return r;
}

}  // namespace dpt
