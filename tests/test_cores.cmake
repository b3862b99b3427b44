# How many of the machine's cores each test holds while it runs, as CTest resources
# (RESOURCE_GROUPS, resource spec written to the build folder and named by
# CTEST_RESOURCE_SPEC_FILE, so plain `ctest -jN` uses it). The parallel level (-j) only caps
# how many tests run at once; the "cores" resource (as many slots as this machine's logical
# cores) is what keeps the CPU-bound tests from overcommitting it, and tests that mostly
# wait hold none of it, so they run beside the others instead of taking a core from them.
#
# Every test gets one of three shares, from its measured CPU seconds per wall second alone
# on an idle machine (tools/suite_cpu_profile.sh; figures below from the 2-core Xeon of
# 2026-12-03, family 6 model 167, unless marked):
#   DPT_IDLE_TESTS      at most about 0.3 cores: waiting out a timeout, a cut link, a
#                       rendezvous window. They take one of DPT_TEST_IDLE_SLOTS "idle" slots
#                       (2), so a few of them together cannot crowd a core.
#   DPT_ONE_CORE_TESTS  about one core or less, whatever their ranks: ranks that take turns,
#                       Slurm's scheduling, one documented command at a time.
#   every other test    min(PROCESSORS, the machine's cores): one core per rank.
# Tests whose checks time the work keep a core per rank even below one core busy
# (zero.overlap_shaped_link compares step times; elastic.slow_survivor has a 4 s timeout;
# train.straggler* tell a slow rank by its time). A name that no longer exists is ignored here, but
# tests.every_test_holds_cores fails on it, and when a test of the suite has no share.
set(DPT_IDLE_TESTS
  diloco.elastic.two_hosts.np4     # 27 s, 0.16 cores: waits out the cut link's timeout
  elastic.two_hosts.np4            # 27 s, 0.21 cores: the same
  torch.bad_input.never_joins      # 13 s, 0.22 cores: waits out the rendezvous timeout
  tcp_dead_lower_peer_probed       # 3 s, 0.04 cores: waits for a dead rank's listener probes
  reliability.records_on_the_wire  # 11 s, 0.25 cores: packet captures between namespaces
  reliability.auth                 # 4 s, 0.07 cores: refused handshakes time out
  reliability.munge_token          # 6 s, 0.10 cores
  reliability.rendezvous           # 5 s, 0.08 cores: rendezvous windows running out
  reliability.mpirun_death.mpi     # 1.4 s, 0.29 cores
  reliability.mpirun_death.tcp     # 1.4 s, 0.22 cores
  elastic.store_gone               # 6 s, 0.03 cores: waits for the lost store's timeout
  elastic.membership               # 5 s, 0.17 cores
  tcp_store                        # 6 s, 0.29 cores: store timeouts
  tcp_frame                        # 3 s, 0.22 cores
  tcp_frame.sockets                # 3 s, 0.21 cores
  launch                           # 3 s, 0.11 cores: the launcher's waits and signals
  collective_queue                 # 1 s, 0.04 cores
)
set(DPT_ONE_CORE_TESTS
  elastic.hung_rank.np4            # 24 s, 0.64 cores: waits out the hung rank's timeout
  torch.suite_subset.np2           # 14 s, 0.67 cores: Python start-up and the suite's waits
  torch.suite_monitored_barrier.np3  # 10 s, 0.72 cores
  torch.suite_monitored_barrier.np8  # 8 s, 0.71 cores
  slurm.preempt                    # 69 s, 0.86 cores: Slurm's scheduling and requeue waits
  comm.flight_recorder             # 13 s, 0.38 cores: waits out a stopped rank's timeout
  tools.run_report                 # 17 s, 0.81 cores: headless Chromium rendering pages
  tools.user_errors                # 2 s, 0.47 cores
  reliability.mpi_under_launch     # 0.7 s, 0.42 cores
  reliability.netns_hosts          # 9 s, 0.56 cores
  reliability.stop                 # 7 s, 0.86 cores
  elastic.hierarchical_hosts.np8   # 9 s, 0.92 cores
  docs.commands.rest               # 42 s, 1.10 cores: one documented command at a time
  train.num_classes.np2            # 12 s, 1.08 cores: short trainings, results compared
  train.val_split                  # 5 s, 1.01 cores
  gpt2.train.token_loss.np2        # 7 s, 1.15 cores: numerics against a reference
  diloco.vs_torch.elastic.np3      # 9 s, 1.16 cores
  libtorch.elastic_grow.np3        # 8 s, 0.4 cores: 40 ms steps waiting for the restarted rank
)
set(DPT_TEST_IDLE_SLOTS 2)
cmake_host_system_information(RESULT DPT_TEST_CORES QUERY NUMBER_OF_LOGICAL_CORES)

# The resource spec: one "cores" instance with a slot per logical core, one "idle" instance.
set(DPT_TEST_RESOURCES ${PROJECT_BINARY_DIR}/test_resources.json)
file(WRITE ${DPT_TEST_RESOURCES}
  "{\"version\": {\"major\": 1, \"minor\": 0}, \"local\": [{\"cores\": [{\"id\": \"0\", \"slots\": ${DPT_TEST_CORES}}], "
  "\"idle\": [{\"id\": \"0\", \"slots\": ${DPT_TEST_IDLE_SLOTS}}]}]}\n")

# Called from dpt_quick_labels(), at the end of every tests/ folder's CMakeLists.txt: a
# test's properties can only be set in the folder that added it.
function(dpt_test_cores)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    if(t IN_LIST DPT_IDLE_TESTS)
      set_tests_properties(${t} PROPERTIES RESOURCE_GROUPS "idle:1" PROCESSORS 1)
    elseif(t IN_LIST DPT_ONE_CORE_TESTS)
      set_tests_properties(${t} PROPERTIES RESOURCE_GROUPS "cores:1" PROCESSORS 1)
    else()
      get_test_property(${t} PROCESSORS ranks)
      if(NOT ranks)
        set(ranks 1)
      endif()
      if(ranks GREATER DPT_TEST_CORES)
        set(ranks ${DPT_TEST_CORES})
      endif()
      set_tests_properties(${t} PROPERTIES RESOURCE_GROUPS "cores:${ranks}")
    endif()
  endforeach()
endfunction()

# A build folder without CTest's cost data (a fresh clone, as CI's) would start the tests in
# the order they were added, so the docs tests (up to 50 s each, added last) would run at the
# end with little beside them; seeded from a recorded run's times, CTest starts the longest
# first, as it does in every later run (it rewrites the file after each).
set(DPT_TEST_COSTS ${PROJECT_BINARY_DIR}/Testing/Temporary/CTestCostData.txt)
set(DPT_RECORDED_TIMES ${PROJECT_SOURCE_DIR}/bench/results/suite/suite_j8_xeon_2026-12-03.tsv)
if(NOT EXISTS ${DPT_TEST_COSTS} AND EXISTS ${DPT_RECORDED_TIMES})
  file(STRINGS ${DPT_RECORDED_TIMES} _recorded)
  set(_costs "")
  foreach(line IN LISTS _recorded)
    string(REPLACE "\t" ";" fields "${line}")  # seconds, test, result
    list(GET fields 0 seconds)
    list(GET fields 1 name)
    string(APPEND _costs "${name} 1 ${seconds}\n")
  endforeach()
  file(WRITE ${DPT_TEST_COSTS} "${_costs}---\n")
endif()
