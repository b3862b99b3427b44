#pragma once
// Support for tests that run as several ranks (under mpiexec or tools/launch).
// The world communicator is created once by dist_test_main.cpp from --backend.
// Ranks stay in lock-step: a check that fails on one rank is agreed on by all through
// all_ok(), so the others do not run ahead into a collective the failing rank skips.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "comm/communicator.h"

namespace dpt::test {

Communicator& world();
const std::string& backend();

// True when `ok` holds on every rank. This rank's failure is reported with `what`; the
// other ranks report that some rank failed.
bool all_ok(bool ok, const std::string& what);

// Collects the failures of a sweep; the first five are kept for the message.
struct Failures {
  std::ostringstream msg;
  int count = 0;
  void add(const std::string& what) {
    if (count++ < 5) msg << what << "\n";
  }
};

}  // namespace dpt::test
