// Checkpoint files written safely (device/safe_file.h): mode 0600 whatever the umask, and a
// symbolic link planted where a temporary file could go left as it is, with what it points
// at. Tagged [checkpoint]: the models_checkpoint test runs them.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "device/safe_file.h"
#include "models/io/gpt2_weights.h"
#include "models/io/safetensors.h"
#include "tests/support/temp_dir.h"

using namespace dpt;
namespace fs = std::filesystem;
using dpt::testing::TempDir;

namespace {

mode_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

std::string text_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The process's umask for the scope: set to `mask`, restored after.
struct UmaskScope {
  mode_t old;
  explicit UmaskScope(mode_t mask) : old(::umask(mask)) {}
  ~UmaskScope() { ::umask(old); }
};

// A file `target` holding "precious" and a link to it at `link`.
void plant_link(const std::string& link, const std::string& target) {
  std::ofstream(target) << "precious";
  fs::create_symlink(target, link);
}

void require_untouched(const std::string& link, const std::string& target) {
  CHECK(fs::is_symlink(fs::symlink_status(link)));
  CHECK(fs::read_symlink(link) == target);
  CHECK(text_of(target) == "precious");
}

const std::vector<float> kValues{1, 2, 3, 4};

}  // namespace

TEST_CASE("safe files: a saved checkpoint is 0600 whatever the umask", "[models][checkpoint]") {
  TempDir dir("safe_mode");
  const std::string path = dir.file("model.safetensors");
  {
    UmaskScope open_umask(0);  // an ordinary create would give 0644 or 0666 here
    save_safetensors(path, {{"w", {4}, kValues}});
  }
  CHECK(mode_of(path) == 0600);
  // Overwriting an existing, more open file leaves the checkpoint 0600 too.
  fs::permissions(path, fs::perms::all);
  save_safetensors(path, {{"w", {4}, kValues}});
  CHECK(mode_of(path) == 0600);
  // Only the checkpoint: no temporary file left beside it.
  CHECK(std::distance(fs::directory_iterator(dir.str()), fs::directory_iterator()) == 1);
  // config.json beside exported weights likewise.
  ModelConfig cfg;
  cfg.n_layer = 1, cfg.d_model = 8, cfg.n_head = 2, cfg.vocab = 5, cfg.n_positions = 4;
  write_gpt2_config(dir.str(), cfg);
  CHECK(mode_of(dir.file("config.json")) == 0600);
}

TEST_CASE("safe files: a link planted at the old temporary names is left untouched", "[models][checkpoint]") {
  TempDir dir("safe_links");
  const std::string path = dir.file("model.safetensors"), target = dir.file("victim.txt");
  // The names the writers used before: predictable, so a link could wait there.
  const std::string old_tmp = path + ".tmp." + std::to_string(::getpid());
  plant_link(old_tmp, target);
  plant_link(dir.file("config.json.tmp"), dir.file("victim2.txt"));
  save_safetensors(path, {{"w", {4}, kValues}});
  ModelConfig cfg;
  cfg.n_layer = 1, cfg.d_model = 8, cfg.n_head = 2, cfg.vocab = 5, cfg.n_positions = 4;
  write_gpt2_config(dir.str(), cfg);
  require_untouched(old_tmp, target);
  require_untouched(dir.file("config.json.tmp"), dir.file("victim2.txt"));
  CHECK(fs::is_regular_file(fs::symlink_status(path)));
  CHECK(load_safetensors(path).tensors.at(0).data == kValues);
}

TEST_CASE("safe files: a temporary name is created exclusively, never through a link", "[models][checkpoint]") {
  TempDir dir("safe_excl");
  const std::string link = dir.file("guessed.tmp"), target = dir.file("victim.txt");
  plant_link(link, target);
  CHECK_THROWS_WITH(create_new_file(link, FileAccess::owner_only),
                    Catch::Contains(link) && Catch::Contains("already at this name"));
  // A dangling link too: O_EXCL refuses it rather than creating its target.
  const std::string dangling = dir.file("dangling.tmp"), nowhere = dir.file("nowhere.txt");
  fs::create_symlink(nowhere, dangling);
  CHECK_THROWS_AS(create_new_file(dangling, FileAccess::owner_only), FileWriteError);
  CHECK_FALSE(fs::exists(nowhere));
  require_untouched(link, target);
}

TEST_CASE("safe files: an uncommitted file leaves nothing; umask access follows the umask", "[models][checkpoint]") {
  TempDir dir("safe_commit");
  const std::string path = dir.file("out.bin");
  {
    AtomicFile f(path);
    f.write("half");
    CHECK(fs::exists(f.temp_path()));
    CHECK(f.temp_path().find(".tmp." + std::to_string(::getpid())) != std::string::npos);
  }  // dropped without commit: as if the write failed
  CHECK(fs::is_empty(dir.str()));
  UmaskScope mask(027);
  write_file_atomically(path, "shared", FileAccess::umask);
  CHECK(mode_of(path) == 0640);
  CHECK(text_of(path) == "shared");
  CHECK_THROWS_WITH(write_file_atomically(dir.file("no/such/folder/x"), "x"),
                    Catch::Contains(dir.file("no/such/folder/x")));
}
