# Tests of the tcp backend, the TCP store and tools/launch (included from
# tests/comm/CMakeLists.txt). Single-process binaries: threads play the ranks.
add_library(dpt_tcp_test_catch_main STATIC tcp_test_main.cpp)
target_link_libraries(dpt_tcp_test_catch_main PUBLIC Catch2::Catch2)

add_executable(tcp_store_test tcp_store_test.cpp)
target_link_libraries(tcp_store_test PRIVATE dpt_tcp_test_catch_main dpt_comm dpt_warnings)
add_test(NAME tcp_store COMMAND tcp_store_test)
set_tests_properties(tcp_store PROPERTIES TIMEOUT 120)

add_executable(elastic_membership_test elastic_membership_test.cpp)
target_link_libraries(elastic_membership_test PRIVATE dpt_tcp_test_catch_main dpt_comm dpt_warnings)
add_test(NAME elastic.membership COMMAND elastic_membership_test)
set_tests_properties(elastic.membership PROPERTIES TIMEOUT 120 LABELS elastic)

add_executable(tcp_frame_test tcp_frame_test.cpp)
target_link_libraries(tcp_frame_test PRIVATE dpt_tcp_test_catch_main dpt_backend_tcp dpt_warnings)
add_test(NAME tcp_frame COMMAND tcp_frame_test)
set_tests_properties(tcp_frame PROPERTIES TIMEOUT 180 ENVIRONMENT "COMM_RENDEZVOUS_TIMEOUT_S=30")
# The same over sockets only: no shared-memory channels, so the threads that wait on
# operations drive the engine themselves (progress_engine.h, "driver").
add_test(NAME tcp_frame.sockets COMMAND tcp_frame_test)
set_tests_properties(tcp_frame.sockets PROPERTIES TIMEOUT 180 ENVIRONMENT "COMM_RENDEZVOUS_TIMEOUT_S=30;COMM_TCP_SHM=0")

# launch_test drives build/bin/launch over a tiny helper program.
add_executable(launch_test_helper launch_test_helper.cpp)
add_executable(launch_test launch_test.cpp)
target_link_libraries(launch_test PRIVATE dpt_tcp_test_catch_main dpt_warnings)
target_compile_definitions(launch_test PRIVATE
  "DPT_LAUNCH_BIN=\"$<TARGET_FILE:launch>\"" "DPT_LAUNCH_HELPER=\"$<TARGET_FILE:launch_test_helper>\"")
add_dependencies(launch_test launch launch_test_helper)
add_test(NAME launch COMMAND launch_test)
set_tests_properties(launch PROPERTIES TIMEOUT 120)

# Real process death (forked ranks): survivors fail within 2 s naming the dead rank.
add_executable(tcp_fault_test tcp_fault_test.cpp)
target_link_libraries(tcp_fault_test PRIVATE dpt_tcp_test_catch_main dpt_backend_tcp dpt_warnings)
add_test(NAME tcp_fault COMMAND tcp_fault_test)
set_tests_properties(tcp_fault PROPERTIES TIMEOUT 120 LABELS fault)
add_test(NAME tcp_fault.sockets COMMAND tcp_fault_test)
set_tests_properties(tcp_fault.sockets PROPERTIES TIMEOUT 120 LABELS fault ENVIRONMENT "COMM_TCP_SHM=0")

# Launch detection from Slurm's variables (compressed task and host lists).
add_executable(launch_env_test launch_env_test.cpp)
target_link_libraries(launch_env_test PRIVATE dpt_tcp_test_catch_main dpt_comm dpt_warnings)
add_test(NAME launch_env.slurm COMMAND launch_env_test "[slurm]" --warn NoTests)
set_tests_properties(launch_env.slurm PROPERTIES TIMEOUT 30 LABELS comm)
