#include "backends/mpi/mpi_runtime.h"

#include <mpi.h>

#include <mutex>
#include <stdexcept>
#include <vector>

namespace dpt::mpi {
namespace {

struct Finalizer {
  bool we_initialized = false;
  ~Finalizer() {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (we_initialized && init && !fin) MPI_Finalize();
  }
};

Finalizer& finalizer() {
  static Finalizer f;
  return f;
}

}  // namespace

void ensure_initialized() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  int init = 0;
  MPI_Initialized(&init);
  Finalizer& f = finalizer();  // constructed before MPI_Init: destroyed after users' statics
  if (!init) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) throw std::runtime_error("MPI_Init_thread failed: " + error_string(rc));
    f.we_initialized = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_MULTIPLE)
      throw std::runtime_error("the MPI library provides thread level " + std::to_string(provided) +
                               ", the mpi backend needs MPI_THREAD_MULTIPLE (" +
                               std::to_string(MPI_THREAD_MULTIPLE) + ")");
  } else {
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
      throw std::runtime_error("MPI was initialized by the application without MPI_THREAD_MULTIPLE");
  }
}

bool is_initialized() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

std::string error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, len);
}

std::string broadcast_from_rank0(const std::string& value) {
  ensure_initialized();
  long long len = static_cast<long long>(value.size());
  int rc = MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) throw std::runtime_error("MPI_Bcast (bootstrap) failed: " + error_string(rc));
  std::vector<char> buf(value.begin(), value.end());
  buf.resize(static_cast<size_t>(len));
  rc = MPI_Bcast(buf.data(), static_cast<int>(len), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) throw std::runtime_error("MPI_Bcast (bootstrap) failed: " + error_string(rc));
  return std::string(buf.begin(), buf.end());
}

void abort_job(int exit_code) {
  if (!is_initialized()) return;
  // A world of one (a singleton: e.g. --backend mpi under build/bin/launch) has no other
  // rank left waiting: the program exits by itself, its error the last line, rather than
  // under MPI_Abort's banner.
  int size = 0;
  if (MPI_Comm_size(MPI_COMM_WORLD, &size) == MPI_SUCCESS && size == 1) return;
  MPI_Abort(MPI_COMM_WORLD, exit_code);
}

}  // namespace dpt::mpi
