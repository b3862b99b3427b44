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

# Device-buffer rows (--device cuda): emulated everywhere, real where a GPU exists.
dpt_add_dist_test(comm_bench.device.emulated TARGET comm_bench RANKS 2 BACKENDS mpi tcp TIMEOUT 120
                  ENV DPT_EMULATE_DEVICE=1 COMM_STAGING_SEGMENT_BYTES=16384
                  ARGS ${_bench_args} --coll reduce_scatter -d bfloat16 -o sum --inplace --device cuda)
dpt_add_dist_test(gpu.comm_bench.device TARGET comm_bench RANKS 2 BACKENDS mpi tcp GPU TIMEOUT 120
                  ARGS -b 8 -e 64M -f 8 -n 5 -w 2 -c 1 --coll allreduce -d float -o sum --device cuda)
dpt_add_dist_test(gpu.comm_bench.device TARGET comm_bench RANKS 1 BACKENDS nccl GPU TIMEOUT 120
                  ARGS -b 8 -e 64M -f 8 -n 5 -w 2 -c 1 --coll allreduce -d bfloat16 -o avg --device cuda)
