// The flight recorder's ring (comm/dispatch/flight_recorder.h) through a one-rank tcp
// communicator: collectives recorded with their states and the trainer's context, the
// newest kept when the ring wraps, point-to-point calls posted then completed, and the
// dump written as the JSON the reader takes.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "backends/registry.h"
#include "comm/dispatch/flight_recorder.h"

namespace {
std::filesystem::path scratch() {
  auto d = std::filesystem::temp_directory_path() / ("flight_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}
}  // namespace

TEST_CASE("flight recorder: a wrapped ring keeps the newest collectives, with states and context", "[flight]") {
  const auto dir = scratch();
  ::setenv("DPT_FLIGHT_DIR", dir.c_str(), 1);
  ::setenv("DPT_FLIGHT_ENTRIES", "4", 1);
  auto comm = dpt::backends::create("tcp");
  std::vector<float> x(10, 1.0f);
  dpt::set_flight_step(7);
  dpt::set_flight_phase("backward");
  dpt::set_flight_bucket(2);
  for (int i = 0; i < 6; ++i) comm->allreduce(dpt::make_buffer(x.data(), x.size()), dpt::ReduceOp::avg);
  dpt::set_flight_bucket(-1);
  dpt::set_flight_phase("update");
  comm->broadcast(dpt::make_buffer(x.data(), 3), 0);
  const std::string path = dpt::dump_flight_records("test");
  REQUIRE(path == (dir / "rank0.json").string());
  std::ifstream f(path);
  const auto doc = nlohmann::json::parse(f);
  CHECK(doc["format"] == "dpt-flight-1");
  CHECK(doc["reason"] == "test");
  CHECK(doc["step"] == 7);
  CHECK(doc["phase"] == "update");
  const auto& world = doc["communicators"][0];
  CHECK(world["size"] == 1);
  const auto& c = world["collectives"];
  REQUIRE(c.size() == 4);  // seqs 3..6 of 7: the ring holds the newest four
  for (size_t i = 0; i < 4; ++i) {
    CHECK(c[i]["seq"] == int(3 + i));
    CHECK(c[i]["state"] == "completed");
    CHECK(c[i]["step"] == 7);
    CHECK(c[i]["t_finished_ns"].get<int64_t>() >= c[i]["t_started_ns"].get<int64_t>());
  }
  CHECK(c[0]["kind"] == "allreduce");
  CHECK(c[0]["op"] == "avg");
  CHECK(c[0]["count"] == 10);
  CHECK(c[0]["bucket"] == 2);
  CHECK(c[0]["phase"] == "backward");
  CHECK(c[3]["kind"] == "broadcast");
  CHECK(c[3]["count"] == 3);
  CHECK(c[3]["bucket"] == -1);
  CHECK(c[3]["phase"] == "update");
  ::unsetenv("DPT_FLIGHT_ENTRIES");
  std::filesystem::remove_all(dir);
}

TEST_CASE("flight recorder: off with DPT_FLIGHT=0", "[flight]") {
  ::setenv("DPT_FLIGHT", "0", 1);
  dpt::FlightRecorder r(0, 1);
  CHECK_FALSE(r.enabled());
  CHECK(dpt::dump_flight_records("test").empty());
  ::unsetenv("DPT_FLIGHT");
}
