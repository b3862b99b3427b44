# Smoke runs of tools/comm_bench (included from tests/comm/CMakeLists.txt): tiny sizes,
# exact checking on (-c 1); comm_bench exits non-zero when any element is wrong, so a
# wrong result fails the test. 2 ranks, mpi and tcp (under mpiexec and tools/launch).
set(_bench_args -b 8 -e 64K -f 16 -n 2 -w 1 -c 1)
dpt_add_dist_test(comm_bench.allreduce TARGET comm_bench RANKS 2 BACKENDS mpi tcp LAUNCH TIMEOUT 120
                  ARGS ${_bench_args} --coll allreduce -d float -o sum)
dpt_add_dist_test(comm_bench.reduce_scatter TARGET comm_bench RANKS 2 BACKENDS mpi tcp LAUNCH TIMEOUT 120
                  ARGS ${_bench_args} --coll reduce_scatter -d bfloat16 -o avg --inplace)
dpt_add_dist_test(comm_bench.allgather TARGET comm_bench RANKS 2 BACKENDS mpi tcp LAUNCH TIMEOUT 120
                  ARGS ${_bench_args} --coll allgather -d int8 --inplace)
dpt_add_dist_test(comm_bench.alltoall TARGET comm_bench RANKS 2 BACKENDS mpi tcp LAUNCH TIMEOUT 120
                  ARGS ${_bench_args} --coll alltoall -d half -o max)
