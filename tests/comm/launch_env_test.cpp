// Launch detection from Slurm's variables (comm/launch/launch_env.h, comm/launch/slurm_lists.h). The
// expected values are Slurm's own documented examples (srun(1), "OUTPUT ENVIRONMENT
// VARIABLES": SLURM_TASKS_PER_NODE "2(x3),1" is two tasks on each of the first three
// nodes and one on the fourth; hostlist ranges keep their zero padding).
#include <catch2/catch.hpp>

#include <set>
#include <utility>

#include <stdlib.h>

#include <map>
#include <string>
#include <vector>

#include "comm/launch/launch_env.h"
#include "comm/launch/slurm_lists.h"
#include "tests/support/launch_env_scope.h"

using namespace dpt;
using dpt::test::LaunchEnv;

TEST_CASE("slurm: SLURM_TASKS_PER_NODE expands N(xM) runs", "[slurm]") {
  CHECK(slurm::expand_tasks_per_node("2(x3),1") == std::vector<int>{2, 2, 2, 1});
  CHECK(slurm::expand_tasks_per_node("4") == std::vector<int>{4});
  CHECK(slurm::expand_tasks_per_node("1,3(x2)") == std::vector<int>{1, 3, 3});
  for (const char* bad : {"", "2(x3", "2(3)", "x,1", "2,,1", "0", "2(x0)", "-1"})
    CHECK_THROWS_WITH(slurm::expand_tasks_per_node(bad),
                      Catch::Contains("SLURM_TASKS_PER_NODE='" + std::string(bad) + "' is malformed"));
}

TEST_CASE("slurm: SLURM_JOB_NODELIST expands bracketed ranges", "[slurm]") {
  using V = std::vector<std::string>;
  CHECK(slurm::expand_host_list("node[01-03,07]") == V{"node01", "node02", "node03", "node07"});
  CHECK(slurm::expand_host_list("a1,b[8-10],c") == V{"a1", "b8", "b9", "b10", "c"});
  CHECK(slurm::expand_host_list("r[1-2]n[1-2]") == V{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(slurm::expand_host_list("gpu[098-101].cluster") ==
        V{"gpu098.cluster", "gpu099.cluster", "gpu100.cluster", "gpu101.cluster"});
  for (const char* bad : {"node[03-01]", "node[01-03", "node01]", "node[]", "node[a-b]", "n[[1]]", "a,,b",
                          "n[0-99999999]"})
    CHECK_THROWS_WITH(slurm::expand_host_list(bad),
                      Catch::Contains("SLURM_JOB_NODELIST='" + std::string(bad) + "' is malformed"));
}

TEST_CASE("slurm: detect_launch reads srun's per-task variables", "[slurm]") {
  // Task 6 of 7 on the fourth node (NODEID 3) of "2(x3),1": the node's only task.
  {
    LaunchEnv env({{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "3"},
                   {"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_JOB_NODELIST", "node[01-03,07]"}});
    const LaunchInfo li = detect_launch();
    CHECK(li.source == "slurm");
    CHECK(li.rank == 6);
    CHECK(li.world_size == 7);
    CHECK(li.local_rank == 0);
    CHECK(li.local_size == 1);
    CHECK(li.master_addr == "node01");
  }
  // Task 3 on the second node: two tasks there, without --ntasks-per-node (so no
  // SLURM_NTASKS_PER_NODE), and MASTER_ADDR given explicitly wins over the node list.
  {
    LaunchEnv env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"},
                   {"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_JOB_NODELIST", "node[01-03,07]"},
                   {"MASTER_ADDR", "10.0.0.5"}, {"MASTER_PORT", "29500"}});
    const LaunchInfo li = detect_launch();
    CHECK(li.local_rank == 1);
    CHECK(li.local_size == 2);
    CHECK(li.master_addr == "10.0.0.5");
    CHECK(li.master_port == 29500);
  }
  // No SLURM_NODEID but every node alike: the count is known anyway.
  {
    LaunchEnv env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                   {"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_NODELIST", "cn[7-8]"}});
    const LaunchInfo li = detect_launch();
    CHECK(li.local_size == 4);
    CHECK(li.master_addr == "cn7");
  }
}

TEST_CASE("slurm: srun with nothing set: the step's first node and a port from the job id", "[slurm]") {
  // Two tasks of step 0 of job 4242 on the second and third nodes of the job (a step on
  // part of the allocation): rank 0 is on the step's first node, cn2.
  {
    LaunchEnv env({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}, {"SLURM_TASKS_PER_NODE", "1(x2)"},
                   {"SLURM_JOB_NODELIST", "cn[1-4]"}, {"SLURM_STEP_NODELIST", "cn[2-3]"},
                   {"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "0"}});
    const LaunchInfo li = detect_launch();
    CHECK(li.master_addr == "cn2");
    CHECK(li.master_port == 10000 + (4242 % 2500) * 8);
  }
  // Later steps of that job (srun run again in one allocation) get the next ports; the
  // ninth wraps onto the first's (SLURM_STEP_ID % 8, docs/slurm.md).
  for (const auto& [step, offset] : {std::pair{"1", 1}, {"3", 3}, {"7", 7}, {"8", 0}, {"11", 3}}) {
    LaunchEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", step}});
    INFO("SLURM_STEP_ID=" << step);
    CHECK(detect_launch().master_port == 10000 + (4242 % 2500) * 8 + offset);
  }
  // Steps of one job and jobs whose ids are close get different ports; MASTER_PORT wins.
  std::set<int> ports;
  for (int job = 7000; job < 9500; job += 3)
    for (int step = 0; step < 8; ++step) {
      const int p = slurm::port_for_step(uint64_t(job), uint64_t(step));
      CHECK(p >= 10000);
      CHECK(p < 30000);
      ports.insert(p);
    }
  CHECK(ports.size() == size_t((9500 - 7000 + 2) / 3) * 8);
  {
    LaunchEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "4242"}, {"MASTER_PORT", "29400"}});
    CHECK(detect_launch().master_port == 29400);
  }
  // A batch script's own step ("batch") counts as step 0.
  {
    LaunchEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_JOB_ID", "17"}, {"SLURM_STEP_ID", "batch"}});
    CHECK(detect_launch().master_port == 10000 + 17 * 8);
  }
}

TEST_CASE("slurm: inconsistent or malformed variables are named", "[slurm]") {
  {
    LaunchEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_TASKS_PER_NODE", "2(x3),1"}});
    CHECK_THROWS_WITH(detect_launch(), Catch::Contains("SLURM_TASKS_PER_NODE='2(x3),1' adds up to 7 tasks but "
                                                       "SLURM_NTASKS=4"));
  }
  {
    LaunchEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "7"}, {"SLURM_NODEID", "4"},
                   {"SLURM_TASKS_PER_NODE", "2(x3),1"}});
    CHECK_THROWS_WITH(detect_launch(), Catch::Contains("SLURM_NODEID='4' is not an integer in [0, 3]"));
  }
  {
    LaunchEnv env({{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "7"}});
    CHECK_THROWS_WITH(detect_launch(), Catch::Contains("SLURM_PROCID='7' is not an integer in [0, 6]"));
  }
  {
    LaunchEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "node[2-1]"}});
    CHECK_THROWS_WITH(detect_launch(), Catch::Contains("SLURM_JOB_NODELIST='node[2-1]' is malformed"));
  }
}
