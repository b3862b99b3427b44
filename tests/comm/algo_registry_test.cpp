// The algorithm registry (comm/algorithms/registry.h) is the one place that names an
// algorithm: every file's Algorithm is in the list; `auto` chooses what it chose before
// the thresholds moved into the algorithms' files; a threshold read from its environment
// variable, or set in code, reaches the selector; the knobs list, docs/environment.md's table and
// the programs' --help texts are all written from the registry.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "comm/algorithms/registry.h"
#include "comm/algorithms/selector.h"
#include "comm/communicator.h"
#include "comm/launch/env.h"

using namespace dpt;

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string run(const std::string& command) {
  std::string out;
  FILE* f = popen(command.c_str(), "r");
  REQUIRE(f);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  CHECK(pclose(f) == 0);
  return out;
}

// A communicator that only resolves algorithms (no messages): world `size`, no native
// collectives unless `native` says so.
class ResolvingCommunicator : public Communicator {
 public:
  ResolvingCommunicator(int size, CommOptions o, bool native = false) : Communicator(0, size, o), native_(native) {}
  ~ResolvingCommunicator() override { shutdown_worker(); }
  std::string backend_name() const override { return "resolving"; }

 protected:
  WorkPtr do_isend(const Buffer&, int, int64_t) override { throw std::logic_error("no point-to-point"); }
  WorkPtr do_irecv(const Buffer&, int, int64_t) override { throw std::logic_error("no point-to-point"); }
  bool native_supports(const CollArgs&) const override { return native_; }
  bool native_preferred(const CollArgs&) const override { return native_; }

 private:
  bool native_;
};

CollArgs call(CollKind kind, size_t bytes, Algo algo = Algo::automatic) {
  CollArgs a;
  a.kind = kind;
  a.send = a.recv = Buffer{nullptr, bytes, DType::u8, {}};
  a.algo = algo;
  return a;
}

std::string resolve(const Communicator& c, CollKind kind, size_t bytes, Algo algo = Algo::automatic) {
  return std::string(c.resolve_algo(call(kind, bytes, algo)).name());
}

// Sets environment variables for one scope.
struct ScopedEnv {
  std::vector<std::string> names;
  ScopedEnv& set(const std::string& name, const std::string& value) {
    ::setenv(name.c_str(), value.c_str(), 1);
    names.push_back(name);
    return *this;
  }
  ~ScopedEnv() {
    for (const auto& n : names) ::unsetenv(n.c_str());
  }
};

}  // namespace

TEST_CASE("registry: every Algorithm defined in comm/algorithms/ is registered, once") {
  const std::filesystem::path dir = std::filesystem::path(DPT_SOURCE_DIR) / "comm" / "algorithms";
  const std::regex definition(R"((?:^|\n)\s*const\s+Algorithm\s+(\w+)\s*\{)");
  std::set<std::string> defined;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".cpp") continue;
    const std::string text = read_file(entry.path());
    for (std::sregex_iterator m(text.begin(), text.end(), definition), end; m != end; ++m)
      defined.insert((*m)[1].str() + " (" + entry.path().filename().string() + ")");
  }
  std::set<std::string> registered;
  for (std::string_view s : algo::registered_symbols()) REQUIRE(registered.insert(std::string(s)).second);
  REQUIRE(!defined.empty());
  for (const std::string& d : defined) {
    INFO(d << " is defined but not in registry.cpp's DPT_ALGORITHMS list");
    CHECK(registered.count(d.substr(0, d.find(' '))) == 1);
  }
  CHECK(defined.size() == registered.size());
  CHECK(algo::all().size() == registered.size());
  // Each (collective, name) once, so --algo NAME means one body per collective.
  for (const algo::Algorithm* a : algo::all()) CHECK(algo::find(a->kind, a->name) == a);
}

TEST_CASE("registry: auto chooses as before for every collective, size and world") {
  const CommOptions defaults;  // thresholds at their declared defaults: 64 KiB and 256 KiB
  for (int world : {1, 2, 3, 4, 8}) {
    ResolvingCommunicator c(world, defaults);
    INFO("world " << world);
    auto allreduce = [&](size_t bytes) { return resolve(c, CollKind::allreduce, bytes); };
    CHECK(allreduce(0) == (world == 2 ? "recursive_doubling" : "tree"));
    CHECK(allreduce(64 * 1024) == (world == 2 ? "recursive_doubling" : "tree"));
    CHECK(allreduce(64 * 1024 + 1) == "tree");
    CHECK(allreduce(256 * 1024) == "tree");
    CHECK(allreduce(256 * 1024 + 1) == "ring");
    CHECK(allreduce(size_t(64) << 20) == "ring");
    for (size_t bytes : {size_t(0), size_t(4096), size_t(64) << 20}) {
      CHECK(resolve(c, CollKind::reduce_scatter, bytes) == "ring");
      CHECK(resolve(c, CollKind::allgather, bytes) == "ring");
      CHECK(resolve(c, CollKind::broadcast, bytes) == "tree");
      CHECK(resolve(c, CollKind::reduce, bytes) == "tree");
      CHECK(resolve(c, CollKind::gather, bytes) == "linear");
      CHECK(resolve(c, CollKind::scatter, bytes) == "linear");
      CHECK(resolve(c, CollKind::alltoall, bytes) == "pairwise");
      CHECK(resolve(c, CollKind::barrier, bytes) == "dissemination");
    }
    // Named requests: that algorithm where the collective has one, else auto.
    CHECK(resolve(c, CollKind::allreduce, 1, Algo::ring) == "ring");
    CHECK(resolve(c, CollKind::allreduce, size_t(64) << 20, Algo::tree) == "tree");
    CHECK(resolve(c, CollKind::allreduce, size_t(64) << 20, Algo::recursive_doubling) == "recursive_doubling");
    CHECK(resolve(c, CollKind::broadcast, 1, Algo::ring) == "tree");     // no ring broadcast: auto
    CHECK(resolve(c, CollKind::reduce_scatter, 1, Algo::tree) == "ring");  // no tree reduce_scatter: auto
    CHECK(resolve(c, CollKind::allreduce, 1, Algo::native) == "native");
  }
  ResolvingCommunicator arena(4, defaults, /*native=*/true);
  CHECK(resolve(arena, CollKind::allreduce, 1) == "native");  // preferred native wins over auto
  CHECK(resolve(arena, CollKind::allreduce, 1, Algo::tree) == "tree");
}

TEST_CASE("registry: each threshold is declared once, by its algorithm, and listed with the knobs") {
  std::set<std::string> knob_names;
  for (const env::Knob& k : env::knobs()) {
    INFO(k.name);
    CHECK(knob_names.insert(k.name).second);  // no variable listed twice
  }
  int thresholds = 0;
  for (const algo::Algorithm* a : algo::all()) {
    if (!a->threshold.env) continue;
    ++thresholds;
    INFO(a->name << " " << coll_name(a->kind) << ": " << a->threshold.env);
    CHECK(algo::find_threshold(a->threshold.env) == a);
    CHECK(std::string(a->threshold.meaning).size() > 10);
    // Unset: the default the algorithm declares, in the knobs' list and through the getter.
    CHECK(env::get_int(a->threshold.env, int64_t(a->threshold.default_bytes)) == int64_t(a->threshold.default_bytes));
    for (const env::Knob& k : env::knobs())
      if (std::string(k.name) == a->threshold.env) CHECK(std::string(k.default_value) == std::to_string(a->threshold.default_bytes));
    CHECK(CommOptions().thresholds.get(a->threshold.env) == a->threshold.default_bytes);
    CHECK(knob_names.count(a->threshold.env) == 1);
  }
  CHECK(thresholds == 6);  // recursive doubling, tree, hierarchical allreduce, reduce-scatter, allgather and broadcast
  // The constants code may name are registered thresholds, with today's defaults.
  CHECK(CommOptions().thresholds.get(env::kRdMaxBytes) == 64 * 1024);
  CHECK(CommOptions().thresholds.get(env::kTreeMaxBytes) == 256 * 1024);
  CHECK(CommOptions().thresholds.segment_bytes == 1 << 20);
  CHECK(CommOptions::from_env().thresholds.get(env::kTreeMaxBytes) == 256 * 1024);
  CHECK(CommOptions::from_env().thresholds.segment_bytes == 1 << 20);
  // COMM_ALGO's meaning names every registered algorithm.
  for (const env::Knob& k : env::knobs())
    if (std::string(k.name) == env::kAlgo)
      for (const std::string& n : algo::names()) CHECK(std::string(k.meaning).find(n) != std::string::npos);
}

TEST_CASE("registry: a threshold read from its environment variable reaches the selector") {
  ScopedEnv e;
  e.set("COMM_TREE_MAX_BYTES", "1024").set("COMM_RD_MAX_BYTES", "16");
  const CommOptions o = CommOptions::from_env();
  CHECK(o.thresholds.get("COMM_TREE_MAX_BYTES") == 1024);
  CHECK(o.thresholds.get("COMM_RD_MAX_BYTES") == 16);
  ResolvingCommunicator three(3, o), two(2, o);
  CHECK(resolve(three, CollKind::allreduce, 1024) == "tree");
  CHECK(resolve(three, CollKind::allreduce, 1025) == "ring");  // 1025 B: tree by default, ring now
  CHECK(resolve(two, CollKind::allreduce, 16) == "recursive_doubling");
  CHECK(resolve(two, CollKind::allreduce, 17) == "tree");     // 17 B: recursive doubling by default
  CHECK(resolve(two, CollKind::allreduce, 1025) == "ring");
  // algo::select itself, with the options' thresholds.
  CHECK(algo::select(call(CollKind::allreduce, 2048), Algo::automatic, 3, false, false, o.thresholds) == Algo::ring);
  CHECK(algo::select(call(CollKind::allreduce, 2048), Algo::automatic, 3, false, false, CommOptions().thresholds) ==
        Algo::tree);

  SECTION("a bad value is an error naming the variable") {
    e.set("COMM_TREE_MAX_BYTES", "-1");
    CHECK_THROWS_WITH(CommOptions::from_env(), Catch::Contains("COMM_TREE_MAX_BYTES"));
    e.set("COMM_TREE_MAX_BYTES", "12k");
    CHECK_THROWS_WITH(CommOptions::from_env(), Catch::Contains("COMM_TREE_MAX_BYTES"));
  }
}

TEST_CASE("registry: thresholds set in code reach the selector; an unknown one is an error") {
  CommOptions o;
  o.thresholds.set(env::kTreeMaxBytes, 8 << 20);
  o.thresholds.set("COMM_RD_MAX_BYTES", 0);
  ResolvingCommunicator two(2, o);
  CHECK(resolve(two, CollKind::allreduce, 1) == "tree");  // rd only up to 0 bytes now
  CHECK(resolve(two, CollKind::allreduce, 0) == "recursive_doubling");
  CHECK(resolve(two, CollKind::allreduce, 8 << 20) == "tree");
  CHECK(resolve(two, CollKind::allreduce, (8 << 20) + 1) == "ring");
  o.thresholds.set(env::kTreeMaxBytes, 100);  // set again: replaces
  CHECK(o.thresholds.get(env::kTreeMaxBytes) == 100);
  CHECK_THROWS_WITH(o.thresholds.set("COMM_TREE_MAX_BYTE", 1),
                    Catch::Contains("COMM_TREE_MAX_BYTE'") && Catch::Contains("COMM_TREE_MAX_BYTES"));
  CHECK_THROWS_AS(o.thresholds.get("COMM_SEGMENT_BYTES"), std::invalid_argument);  // not an algorithm's threshold
}

TEST_CASE("registry: help_text lists every registered algorithm with its collectives") {
  const std::string help = algo::help_text();
  INFO(help);
  CHECK(help.rfind("auto | native", 0) == 0);
  for (const algo::Algorithm* a : algo::all()) {
    CHECK(help.find(std::string(" | ") + a->name + " (") != std::string::npos);
    CHECK(help.find(coll_name(a->kind)) != std::string::npos);
  }
  CHECK(help.find("ring (allreduce, reduce_scatter, allgather)") != std::string::npos);
  CHECK(help.find("tree (allreduce, broadcast, reduce)") != std::string::npos);
  // Every listed name parses.
  for (const std::string& n : algo::names()) CHECK(std::string(parse_algo(n).name()) == n);
}

TEST_CASE("registry: demo --help and comm_bench --help list every registered algorithm") {
  for (const char* program : {DPT_DEMO_BIN, DPT_COMM_BENCH_BIN}) {
    const std::string out = run(std::string(program) + " --help 2>&1");
    INFO(program << " --help:\n" << out);
    for (const std::string& n : algo::names()) {
      const std::regex word("(^|[^a-z_])" + n + "([^a-z_]|$)");
      CHECK(std::regex_search(out, word));
    }
    CHECK(out.find("native") != std::string::npos);
  }
}

TEST_CASE("registry: docs/environment.md's table is launch --print-env's") {
  const std::string readme = read_file(std::filesystem::path(DPT_SOURCE_DIR) / "docs" / "environment.md");
  const std::string header = "| Variable | Default | Meaning |\n";
  const size_t begin = readme.find(header);
  REQUIRE(begin != std::string::npos);
  size_t end = readme.find("\n\n", begin);
  if (end == std::string::npos) end = readme.size() - 1;  // the table ends the page
  const std::string table = readme.substr(begin, end + 1 - begin);
  const std::string printed = run(std::string(DPT_LAUNCH_BIN) + " --print-env");
  INFO("regenerate docs/environment.md's table with: build/bin/launch --print-env");
  CHECK(table == printed);
  for (const env::Knob& k : env::knobs()) CHECK(table.find(std::string("| `") + k.name + "` |") != std::string::npos);
  // The --algo row of docs/usage.md's "Choosing a backend and an algorithm" names every algorithm.
  const std::string usage = read_file(std::filesystem::path(DPT_SOURCE_DIR) / "docs" / "usage.md");
  const size_t row = usage.find("| `--algo` / `COMM_ALGO` |");
  REQUIRE(row != std::string::npos);
  const std::string algo_row = usage.substr(row, usage.find('\n', row) - row);
  for (const std::string& n : algo::names()) {
    INFO("docs/usage.md's --algo row misses " << n);
    CHECK(algo_row.find("`" + n + "`") != std::string::npos);
  }
}
