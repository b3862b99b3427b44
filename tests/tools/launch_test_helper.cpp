// A tiny program for launch_test. Modes (first argument):
//   print              each rank prints two stdout lines (one in two writes) and one stderr line
//   fail RANK CODE DIR rank RANK exits with CODE after 300 ms; the others write DIR/pid.<rank>
//                      and sleep (launch must kill them)
//   selfkill RANK DIR  rank RANK kills itself with SIGKILL; the others sleep
//   stubborn DIR       every rank ignores SIGTERM and writes DIR/pid.<rank>; rank 0 exits 1
//   env                prints the launch variables
//   elastic-race       2 launches --elastic x 2 ranks (block order): node 0's launcher,
//                      and the store with it, ends before node 1's asks whether training
//                      finished. Rank 3 fails at once; rank 0 writes elastic/done once
//                      node 1's launcher recorded rank 3 dead, and exits 0 once rank 2
//                      has seen it (rank 1 exits 0 at once); rank 2 exits 0 only once the
//                      store refuses connections.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "comm/store/job_token.h"
#include "comm/store/tcp_store.h"

static int env_int(const char* n) {
  const char* v = std::getenv(n);
  return v ? std::atoi(v) : -1;
}

static void write_pid(const std::string& dir, int rank) {
  std::ofstream(dir + "/pid." + std::to_string(rank)) << getpid() << "\n";
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "print";
  int rank = env_int("RANK");
  if (mode == "print") {
    std::printf("hello from rank %d\n", rank);
    std::fflush(stdout);
    std::printf("second ");
    std::fflush(stdout);
    usleep(20000);
    std::printf("line %d\n", rank);
    std::fprintf(stderr, "err %d\n", rank);
    return 0;
  }
  if (mode == "env") {
    std::printf("RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s LOCAL_WORLD_SIZE=%s MASTER_ADDR=%s MASTER_PORT=%s\n",
                std::getenv("RANK"), std::getenv("WORLD_SIZE"), std::getenv("LOCAL_RANK"),
                std::getenv("LOCAL_WORLD_SIZE"), std::getenv("MASTER_ADDR"), std::getenv("MASTER_PORT"));
    return 0;
  }
  if (mode == "fail" && argc >= 5) {
    if (rank == std::atoi(argv[2])) {
      usleep(300000);
      std::printf("rank %d failing now\n", rank);
      return std::atoi(argv[3]);
    }
    write_pid(argv[4], rank);
    sleep(60);
    return 0;
  }
  if (mode == "selfkill" && argc >= 4) {
    if (rank == std::atoi(argv[2])) {
      usleep(300000);
      raise(SIGKILL);
    }
    write_pid(argv[3], rank);
    sleep(60);
    return 0;
  }
  if (mode == "stubborn" && argc >= 3) {
    signal(SIGTERM, SIG_IGN);
    write_pid(argv[2], rank);
    if (rank == 0) {
      usleep(300000);
      return 1;
    }
    sleep(60);
    return 0;
  }
  if (mode == "elastic-race") {
    using dpt::Millis;
    const std::string host = std::getenv("MASTER_ADDR");
    const int port = env_int("MASTER_PORT");
    auto client = [&](Millis timeout) {
      return std::make_unique<dpt::TcpStoreClient>(host, port, timeout, dpt::ErrorContext{}, dpt::job_token_from_env());
    };
    if (rank == 3) return 1;
    if (rank == 0) {
      auto store = client(Millis(20000));
      store->get("elastic/dead/n1.l1.i0", Millis(20000));
      store->set("elastic/done", "1");
      std::printf("rank 0 wrote elastic/done\n");
      store->get("race/rank2-saw-done", Millis(20000));  // then the store may go
    }
    if (rank == 2) {
      {
        auto store = client(Millis(20000));
        store->get("elastic/done", Millis(20000));
        store->set("race/rank2-saw-done", "1");
      }
      for (int i = 0; i < 200; ++i) {
        try {
          client(Millis(100))->check("elastic/done");
        } catch (const std::exception&) {
          std::printf("rank 2: the store is gone, exiting 0\n");
          return 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      std::printf("rank 2: the store never went away\n");
      return 4;
    }
    return 0;
  }
  std::fprintf(stderr, "launch_test_helper: bad arguments\n");
  return 2;
}
