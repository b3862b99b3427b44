// Catch2 main for the single-process tcp/store/launch tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
