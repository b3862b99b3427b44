# Registers fuzz.smoke in the main build (included from tests/CMakeLists.txt); the fuzz
# targets themselves are a project of their own (CMakeLists.txt here, built by run_fuzz.sh).
# Fuzzing: tests/fuzz/run_fuzz.sh builds the libFuzzer targets (frame/hello/proof, store
# protocol, checkpoint parser) with clang into <build>/fuzz, replays the corpus kept in
# tests/fuzz/corpus/ (inputs longer runs found, minimized) and the seeds, then fuzzes each
# target for 5 s, two at a time; a crash, leak, sanitizer report or violated property fails
# the test and prints the reproducer. Longer, timed fuzzing is a documented command
# (docs/reliability.md), not a CTest. Needs clang++ with libFuzzer (Debian: clang, libclang-rt-14-dev).
find_program(DPT_CLANGXX NAMES clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14)
if(DPT_CLANGXX)
  execute_process(COMMAND ${DPT_CLANGXX} -print-file-name=libclang_rt.fuzzer-${CMAKE_SYSTEM_PROCESSOR}.a
                  OUTPUT_VARIABLE dpt_libfuzzer OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  execute_process(COMMAND ${DPT_CLANGXX} -dumpversion OUTPUT_VARIABLE dpt_clang_version ERROR_QUIET)
  string(REGEX MATCH "^[0-9]+" dpt_clang_major "${dpt_clang_version}")
endif()
if(NOT DPT_CLANGXX)
  message(STATUS "fuzz.smoke not registered: no clang++ found (Debian package clang)")
elseif(NOT IS_ABSOLUTE "${dpt_libfuzzer}" OR NOT EXISTS "${dpt_libfuzzer}")
  message(STATUS "fuzz.smoke not registered: ${DPT_CLANGXX} has no libFuzzer (Debian package libclang-rt-${dpt_clang_major}-dev)")
else()
  add_test(NAME fuzz.smoke COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_fuzz.sh 5 ${PROJECT_BINARY_DIR}/fuzz)
  set_tests_properties(fuzz.smoke PROPERTIES TIMEOUT 400 LABELS "fault;fuzz" PROCESSORS 2
                       ENVIRONMENT "CLANGXX=${DPT_CLANGXX};FUZZ_JOBS=2")
endif()

