# Reliability and security tests (issue 7), label "fault". Included from
# tests/comm/CMakeLists.txt. Figures (detection time, cost, memory) are printed; run
# `ctest -L fault -V` to see them.
add_executable(reliability_helper reliability_helper.cpp)
target_link_libraries(reliability_helper PRIVATE dpt_backends dpt_warnings)

add_executable(reliability_auth_test reliability_auth_test.cpp)
target_link_libraries(reliability_auth_test PRIVATE dpt_tcp_test_catch_main dpt_backend_tcp dpt_warnings)
add_test(NAME reliability.auth COMMAND reliability_auth_test)
set_tests_properties(reliability.auth PROPERTIES TIMEOUT 60 LABELS fault)

add_executable(reliability_test reliability_test.cpp)
target_link_libraries(reliability_test PRIVATE dpt_tcp_test_catch_main dpt_backend_tcp dpt_warnings)
target_compile_definitions(reliability_test PRIVATE "DPT_RELIABILITY_HELPER=\"$<TARGET_FILE:reliability_helper>\"")
add_dependencies(reliability_test reliability_helper)
foreach(part stop mismatch rendezvous)
  add_test(NAME reliability.${part} COMMAND reliability_test "[${part}]" --warn NoTests)
  set_tests_properties(reliability.${part} PROPERTIES TIMEOUT 90 LABELS fault)
endforeach()

if(DPT_HAVE_MPI)
  foreach(backend mpi tcp)
    add_test(NAME reliability.mpirun_death.${backend}
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fault_mpirun_death.sh ${MPIEXEC_EXECUTABLE}
                     $<TARGET_FILE:reliability_helper> ${backend})
    set_tests_properties(reliability.mpirun_death.${backend} PROPERTIES TIMEOUT 90 LABELS fault PROCESSORS 3
                         ENVIRONMENT "${DPT_MPI_TEST_ENV}")
  endforeach()
endif()

# Random bytes, HTTP, a port scan and forged handshakes against a 2-rank tcp training
# run: it must finish (exit 0) and its memory grow by at most 64 MiB.
if(TARGET train)
  add_test(NAME reliability.garbage_during_training
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fault_garbage_during_training.sh $<TARGET_FILE:launch>
                   $<TARGET_FILE:train> 2500)
  set_tests_properties(reliability.garbage_during_training PROPERTIES TIMEOUT 120 LABELS fault PROCESSORS 2
                       ENVIRONMENT "COMM_TIMEOUT_S=60;COMM_RENDEZVOUS_TIMEOUT_S=60")
endif()

# Kill during save: rank 0 SIGKILLed 5 times while writing a checkpoint; `latest` must
# always name a loadable one, and temp files are never taken for checkpoints.
if(TARGET train)
  add_test(NAME reliability.kill_during_save
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fault_kill_during_save.sh $<TARGET_FILE:launch> $<TARGET_FILE:train> 5)
  set_tests_properties(reliability.kill_during_save PROPERTIES TIMEOUT 120 LABELS fault PROCESSORS 2
                       ENVIRONMENT "COMM_TIMEOUT_S=30;COMM_RENDEZVOUS_TIMEOUT_S=30")
endif()

# Several hosts: 2 network namespaces joined by a veth pair, demo + training + a cut link
# across them over tcp. Needs root (CAP_NET_ADMIN); exits 77 (skipped) otherwise.
if(TARGET train AND TARGET demo)
  add_test(NAME reliability.netns_hosts
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fault_netns_hosts.sh $<TARGET_FILE:demo> $<TARGET_FILE:train>
                   $<TARGET_FILE:reliability_helper>)
  set_tests_properties(reliability.netns_hosts PROPERTIES TIMEOUT 90 LABELS fault PROCESSORS 2 SKIP_RETURN_CODE 77
                       ENVIRONMENT "COMM_RENDEZVOUS_TIMEOUT_S=30")
endif()

# A /dev/shm too small for the tcp backend's shared memory: falls back, never SIGBUS.
add_test(NAME reliability.small_dev_shm
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fault_small_dev_shm.sh $<TARGET_FILE:launch> $<TARGET_FILE:comm_bench>)
set_tests_properties(reliability.small_dev_shm PROPERTIES TIMEOUT 60 LABELS fault PROCESSORS 2 SKIP_RETURN_CODE 77)

# Fuzzing: tests/fuzz/run_fuzz.sh builds the libFuzzer targets (frame/hello/proof, store
# protocol, checkpoint parser) with clang into <build>/fuzz and runs each for 20 s, two at
# a time; a crash, leak, sanitizer report or violated property fails the test and prints
# the reproducer. Needs clang++ with libFuzzer (Debian: clang, libclang-rt-14-dev).
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
  add_test(NAME fuzz.smoke COMMAND ${PROJECT_SOURCE_DIR}/tests/fuzz/run_fuzz.sh 20 ${PROJECT_BINARY_DIR}/fuzz)
  set_tests_properties(fuzz.smoke PROPERTIES TIMEOUT 400 LABELS "fault;fuzz" PROCESSORS 2
                       ENVIRONMENT "CLANGXX=${DPT_CLANGXX};FUZZ_JOBS=2")
endif()

# The mpi backend started by a non-MPI launcher: every process would be a world of one
# and train alone; it must refuse, naming both counts and what to do.
if(DPT_HAVE_MPI)
  add_test(NAME reliability.mpi_under_launch COMMAND $<TARGET_FILE:launch> -n 2 $<TARGET_FILE:train> --backend mpi --steps 1)
  set_tests_properties(reliability.mpi_under_launch PROPERTIES TIMEOUT 60 LABELS fault PROCESSORS 2
                       PASS_REGULAR_EXPRESSION "say 2 processes, but MPI sees a world of 1.*mpirun -np 2"
                       FAIL_REGULAR_EXPRESSION "final:")
endif()
