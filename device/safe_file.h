#pragma once
// Files written whole or not at all, and never through a link someone planted: the one way
// the project writes a file that a later run reads back (checkpoints, optimizer state,
// weights, `latest`, config.json, traces, token files). It lives in device/, the bottom of
// the stack, because comm/, models/, train/, bindings/ and tools/ all link it.
//
// The rule, for every file written here:
//   - the bytes go to a new file beside the destination (the same folder, so the rename
//     cannot cross file systems), named `<name>.<12 random characters>.tmp.<pid>`: a
//     name nobody can guess ahead, with the writer's pid for people and fault tests;
//   - it is created with O_CREAT|O_EXCL|O_NOFOLLOW: never an existing file, never through
//     a symbolic link (one planted at that name makes the create fail, the link and what it
//     points at untouched; a fresh name is drawn);
//   - written, fsync'd, renamed over the destination (a reader sees the old file or the
//     new one, never a torn one), and the folder fsync'd so the rename survives a power
//     loss; on any failure, or when dropped uncommitted, the temporary file is removed.
//   - mode: FileAccess::owner_only is 0600 whatever the umask (checkpoints and weights
//     hold a model someone may not want shared); FileAccess::umask is 0666 less the
//     process's umask, what an ofstream gives (files meant to be shared, e.g. token data).
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dpt {

enum class FileAccess { owner_only, umask };

// A file that could not be written: what() is "cannot write <path>: <reason>"; path() and
// reason() apart, for callers with an error type of their own (CheckpointError, DataError).
class FileWriteError : public std::runtime_error {
 public:
  FileWriteError(const std::string& path, const std::string& reason)
      : std::runtime_error("cannot write " + path + ": " + reason), path_(path), reason_(reason) {}
  const std::string& path() const { return path_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string path_, reason_;
};

// One file being written to `path`: created at once under its temporary name, moved into
// place by commit(). Without commit() (an exception, an early return) the temporary file
// is removed and `path` is as it was.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path, FileAccess access = FileAccess::owner_only);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // fsync, close, rename over the destination, fsync its folder. Call once.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// AtomicFile for contents already in memory.
void write_file_atomically(const std::string& path, std::string_view contents,
                           FileAccess access = FileAccess::owner_only);

// Creates exactly `path` for writing (O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC) and returns its
// descriptor; FileWriteError if anything is already there, a symbolic link included.
int create_new_file(const std::string& path, FileAccess access);

}  // namespace dpt
