# ctest -L quick: the edit-compile-test loop, 2-3 minutes on 2 cores (145-159 s on 2026-12-03). Every
# test here ran under 2.5 s on a 2-core EPYC in the full suite when it was chosen, and together they touch every folder:
# the plan and the collectives' entry points, a DDP and ZeRO equivalence, the models'
# gradient checks, the data loaders, the optimizers, the tokenizer, the layering. The
# README's command still runs everything. A name that no longer exists is ignored (a
# renamed test drops out of quick, never out of the suite).
set(DPT_QUICK_TESTS
  backends.registry
  bn.sync_bn_switch.np2
  collective_queue
  comm.flight_recorder_ring
  comm.algo_registry
  comm.hierarchical_hosts
  comm.thread_plan
  comm.topology
  diloco.equivalence.np2
  comm_bench.allgather.mpi.np2
  comm_bench.allgather.tcp-launch.np2
  comm_bench.allgather.tcp.np2
  comm_bench.allreduce.mpi.np2
  comm_bench.allreduce.tcp-launch.np2
  comm_bench.allreduce.tcp.np2
  comm_bench.alltoall.mpi.np2
  comm_bench.alltoall.tcp-launch.np2
  comm_bench.alltoall.tcp.np2
  comm_bench.device.emulated.mpi.np2
  comm_bench.device.emulated.tcp.np2
  comm_bench.reduce_scatter.mpi.np2
  comm_bench.reduce_scatter.tcp-launch.np2
  comm_bench.reduce_scatter.tcp.np2
  data_augment_vs_torchvision
  ddp.equivalence.np2
  ddp.equivalence.np3
  ddp.equivalence.np4
  ddp.grad_accum.np2
  ddp.powersgd.np2
  ddp.powersgd_compressor
  ddp.powersgd_refused
  ddp.resume.np2
  ddp.switch_backend.np2
  ddp.tcp_vs_mpi.np3
  ddp.uneven.np2
  device_collectives.emulated.mpi.np2
  device_collectives.emulated.mpi.np3
  device_collectives.emulated.tcp.np2
  device_collectives.emulated.tcp.np3
  docs.commands_selftest
  early_exit.tcp-launch.np2
  early_exit.tcp-launch.np3
  elastic.check_samples
  elastic.eval_kill.np4
  fp16.resume.np2
  fp16.skip.np2
  gpt2.hf_reference
  gpt2.train.hf_checkpoint.np2
  gpt2.train.memory_refusal.np4
  launch_env.slurm
  layout.include_rules
  models_batch_norm_emulated
  models_checkpoint
  models_conv_kernels
  models_cuda_errors
  models_cuda_refuses_emulated
  models_gemm
  models_gemm.by_size
  models_gemm_bf16
  models_gpt2
  models_gradcheck
  models_loss_over_output
  models_misc
  models_softmax_xent_emulated
  models_threads.onednn
  models_threads.openblas
  models_trainer
  nccl_without_gpu
  reliability.mismatch
  reliability.mpi_under_launch
  reliability.mpirun_death.mpi
  reliability.mpirun_death.tcp
  reliability.small_dev_shm
  tcp_connections_on_demand
  tcp_dead_peer_on_demand
  tcp_fault
  tcp_fault.sockets
  tokenizer.cli
  tokenizer.js_classes
  tokenizer.js_hard
  tokenizer.pretokenize
  tokenizer.tokenizer
  tokenizer.utf8
  tokenizer.vocabulary
  tools.llmc_data
  tools.llmc_summary
  torch.bad_input.dtype
  torch.bad_input.killed
  torch.ops.mpi.np3
  train.compare_runs_selftest
  training.data.augment
  training.data.cifar10
  training.data.fashion_mnist
  training.data.loader
  training.data.sampler
  training.data.synthetic
  training.data.text
  training.data.text_docs
  training.data.text_docs_fortunes
  training.optim.adam
  training.optim.clip
  training.optim.device_state
  training.optim.master
  training.optim.schedule
  training.optim.sgd
  training.optim.shard
  zero.chunked_p2p.mpi.np2
  zero.chunked_p2p.tcp.np2
  zero.memory.np4
  zero.sharded_build.mpi.np2
  zero.sharded_build.mpi.np3
  zero.sharded_build.tcp.np2
  zero.sharded_build.tcp.np3
  zero.snapshot_restore.tcp.np4
  tools.threads_per_rank layout.include_rules_selftest bench.cluster_selftest train.stop_signals_storm)

# Called at the end of every tests/ folder's CMakeLists.txt (a test's properties can only
# be set in the folder that added it).
function(dpt_quick_labels)
  foreach(t IN LISTS DPT_QUICK_TESTS)
    if(TEST ${t})
      set_property(TEST ${t} APPEND PROPERTY LABELS quick)
    endif()
  endforeach()
  dpt_test_cores()  # tests/test_cores.cmake
endfunction()
