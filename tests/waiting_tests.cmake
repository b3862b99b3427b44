# Tests that keep about one core busy or less, whatever their rank count: mostly waiting (a
# timeout running out, a link cut, a rendezvous window), or ranks that take turns. They take
# one of ctest's slots, not one per rank, so the suite runs other work beside them. Each entry is measured with the test alone on a 2-core EPYC: CPU seconds of
# the whole machine (/proc/stat) over wall seconds. Only tests whose checks do not time the
# work itself belong here (zero.overlap_shaped_link, which compares step times, does not;
# elastic.slow_survivor's 4 s timeout keeps its slots too). A name that no longer exists is
# ignored. (reliability.netns_hosts, 0.56 cores, failed once beside elastic.hung_rank with its
# output lost and passed alone and beside a CPU hog: it keeps its 2 slots until understood.)
# The figures marked (Xeon) come from tools/suite_cpu_profile.sh on a 2-core Intel
# Xeon (family 6 model 167), each test alone, 2026-12-03.
set(DPT_WAITING_TESTS
  diloco.elastic.two_hosts.np4   # 26 s, 0.07 cores: waits out the cut link's timeout
  elastic.two_hosts.np4          # 26 s, 0.10 cores: the same
  torch.bad_input.never_joins    # waits out the rendezvous timeout (0.06 cores)
  elastic.hung_rank.np4          # 20 s, 0.39 cores: waits out the hung rank's timeout
  torch.suite_subset.np2         # 9 s, 0.46 cores: Python start-up and the suite's waits
  slurm.preempt                  # 69 s, 0.86 cores (Xeon): Slurm's scheduling and requeue waits
  comm.flight_recorder           # 13 s, 0.38 cores (Xeon): waits out a stopped rank's timeout
  reliability.records_on_the_wire  # 11 s, 0.25 cores (Xeon): packet captures between namespaces
  tools.run_report               # 17 s, 0.81 cores (Xeon): headless Chromium rendering pages
  tcp_dead_lower_peer_probed     # 3 s, 0.04 cores (Xeon): waits for a dead rank's listener probes
  docs.commands.rest             # 42 s, 1.10 cores (Xeon): one documented command at a time
  train.num_classes.np2          # 12 s, 1.08 cores (Xeon): short trainings, results compared
  train.val_split                # 5 s, 1.01 cores (Xeon)
  gpt2.train.token_loss.np2      # 7 s, 1.15 cores (Xeon): numerics against a reference
)

# Called from dpt_quick_labels(), at the end of every tests/ folder's CMakeLists.txt.
function(dpt_waiting_slots)
  foreach(t IN LISTS DPT_WAITING_TESTS)
    if(TEST ${t})
      set_property(TEST ${t} PROPERTY PROCESSORS 1)
    endif()
  endforeach()
endfunction()
