#include "device/safe_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

namespace dpt {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

// 12 characters of [a-z0-9] from the kernel's random source: 62 bits, so a name cannot be
// guessed (and a link planted) ahead of the write. random_device where getrandom fails.
std::string random_tag() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char bytes[12];
  if (::getrandom(bytes, sizeof bytes, 0) != ssize_t(sizeof bytes)) {
    std::random_device rd;
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(rd());
  }
  std::string tag;
  for (unsigned char b : bytes) tag += kAlphabet[b % 36];
  return tag;
}

std::string folder_of(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// The descriptor, or -errno. owner_only asks for 0600 outright (the umask can only take
// bits away); umask asks for 0666 and lets the kernel apply the process's umask, as an
// ofstream would.
int open_new(const std::string& path, FileAccess access) {
  const mode_t mode = access == FileAccess::owner_only ? 0600 : 0666;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  return fd >= 0 ? fd : -errno;
}

std::string create_failure(int e) {
  return e == EEXIST ? "something is already at this name (a file or a symbolic link); it is left as it is"
                     : "cannot create: " + errno_text(e);
}

}  // namespace

int create_new_file(const std::string& path, FileAccess access) {
  const int fd = open_new(path, access);
  if (fd < 0) throw FileWriteError(path, create_failure(-fd));
  return fd;
}

AtomicFile::AtomicFile(std::string path, FileAccess access) : path_(std::move(path)) {
  const std::string stem = path_ + ".";
  const std::string pid = ".tmp." + std::to_string(::getpid());
  // A name taken (a leftover, or a link someone planted and guessed right) is left alone
  // and another drawn; 16 draws all taken means something is wrong with the folder.
  for (int attempt = 0;; ++attempt) {
    temp_ = stem + random_tag() + pid;
    fd_ = open_new(temp_, access);
    if (fd_ >= 0) return;
    if (fd_ != -EEXIST || attempt == 15) {
      throw FileWriteError(path_, "temporary file " + temp_ + ": " + create_failure(-fd_));
    }
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  if (fd_ < 0) throw FileWriteError(path_, "written after commit");
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw FileWriteError(path_, "write to " + temp_ + " failed: " + errno_text(errno));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw FileWriteError(path_, "committed twice");
  if (::fsync(fd_) != 0) throw FileWriteError(path_, "fsync of " + temp_ + " failed: " + errno_text(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) throw FileWriteError(path_, "close of " + temp_ + " failed: " + errno_text(errno));
  // rename replaces whatever is at the destination, a link included, without following it.
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    throw FileWriteError(path_, "rename from " + temp_ + " failed: " + errno_text(errno));
  committed_ = true;
  const std::string dir = folder_of(path_);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) throw FileWriteError(path_, "in place, but its folder cannot be opened to fsync: " + errno_text(errno));
  const int sync = ::fsync(dfd);
  const int e = errno;
  ::close(dfd);
  if (sync != 0) throw FileWriteError(path_, "in place, but the fsync of its folder failed: " + errno_text(e));
}

void write_file_atomically(const std::string& path, std::string_view contents, FileAccess access) {
  AtomicFile f(path, access);
  f.write(contents);
  f.commit();
}

}  // namespace dpt
