# Tests whose wall time is mostly waiting (a timeout running out, a link cut, a rendezvous
# window): they take one of ctest's slots, not one per rank, so the suite runs other work
# beside them. Each entry is measured with the test alone on a 2-core EPYC: CPU seconds of
# the whole machine (/proc/stat) over wall seconds. Only tests whose checks do not time the
# work itself belong here (zero.overlap_shaped_link, which compares step times, does not;
# elastic.slow_survivor's 4 s timeout keeps its slots too). A name that no longer exists is
# ignored.
set(DPT_WAITING_TESTS
  diloco.elastic.two_hosts.np4   # 26 s, 0.07 cores: waits out the cut link's timeout
  elastic.two_hosts.np4          # 26 s, 0.10 cores: the same
  torch.bad_input.never_joins    # waits out the rendezvous timeout (0.06 cores)
  elastic.hung_rank.np4          # 20 s, 0.39 cores: waits out the hung rank's timeout
  torch.suite_subset.np2         # 9 s, 0.46 cores: Python start-up and the suite's waits
)

# Called from dpt_quick_labels(), at the end of every tests/ folder's CMakeLists.txt.
function(dpt_waiting_slots)
  foreach(t IN LISTS DPT_WAITING_TESTS)
    if(TEST ${t})
      set_property(TEST ${t} PROPERTY PROCESSORS 1)
    endif()
  endforeach()
endfunction()
