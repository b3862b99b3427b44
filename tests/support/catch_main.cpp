// The one Catch2 main of the training tests; every test binary links dpt_test_catch_main.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
