#pragma once
// Sets exactly `vars` among the launch variables detect_launch reads (the others unset)
// for one scope, and restores the process environment afterwards.
#include <cstdlib>
#include <map>
#include <string>

namespace dpt::test {

class LaunchEnv {
 public:
  explicit LaunchEnv(const std::map<std::string, std::string>& vars) {
    for (const char* n : kAll) {
      if (const char* v = ::getenv(n)) saved_[n] = v;
      ::unsetenv(n);
    }
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~LaunchEnv() {
    for (const char* n : kAll) ::unsetenv(n);
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  LaunchEnv(const LaunchEnv&) = delete;
  LaunchEnv& operator=(const LaunchEnv&) = delete;

 private:
  static constexpr const char* kAll[] = {
      "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
      "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
      "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS",
      "SLURM_LOCALID", "SLURM_NODEID", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_JOB_NODELIST",
      "SLURM_NODELIST", "SLURM_STEP_NODELIST", "SLURM_JOB_ID", "SLURM_STEP_ID"};
  std::map<std::string, std::string> saved_;
};

}  // namespace dpt::test
