#!/usr/bin/env bash
# gpu_verify.sh: the checks that need a GPU, in one run (a lent GPU machine's time is
# short): the device, the gpu-labelled tests, comm_bench rows on device and host buffers
# for every backend, training on the GPU next to the CPU, and the llm.c anchor.
#
# usage: tools/gpu_verify.sh [probe] [tests] [bench] [train] [edges] [resnet] [llmc] [curves]
#   default: probe tests llmc resnet curves (what issue 28 must show, sized for one call of
#   a lent machine's 10 minutes); bench, train and edges (the rows of docs/gpu.md's
#   2026-11-22 run) on request.
# Run from the repository root with a build in build/ (on a machine without our Debian
# packages: `source .gpu/env.sh` first, see tools/gpu_bundle.sh). Logs go to $OUT when
# set, else to gpu_verify_logs/.
set -uo pipefail
log_dir=${OUT:-gpu_verify_logs}; mkdir -p "$log_dir"
steps=("$@"); [[ ${#steps[@]} -gt 0 ]] || steps=(probe tests llmc resnet curves)
mpi=(mpiexec --oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS=1)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
summary=()
note() { summary+=("$*"); }
# nvidia-smi's memory.used every 200 ms into FILE until stop_sampling (peak device memory).
sampler=""
sample_memory() {
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$1" 2>/dev/null & sampler=$!
}
stop_sampling() { [[ -n $sampler ]] && kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; sampler=""; }
run_logged() {  # name, command...: runs, keeps the whole output under $log_dir/name.log
  local name=$1; shift
  echo "== $name: $*"
  "$@" 2>&1 | tee "$log_dir/$name.log"
  local rc=${PIPESTATUS[0]}
  note "$(printf '%-34s rc=%s' "$name" "$rc")"
  return "$rc"
}

for step in "${steps[@]}"; do
  case $step in
    probe)
      nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
      # cuDNN 9 for the convolutions (the cnn and resnet18 models), opened at run time.
      cudnn=$(find /usr/local/cuda*/ /usr/lib /opt -name "libcudnn.so.9*" 2>/dev/null | head -1)
      echo "cudnn: ${cudnn:-none found (convolutions on the GPU will fail naming libcudnn.so.9)}" | tee "$log_dir/cudnn.txt"
      run_logged device_info build/bin/device_info ;;
    tests)
      # Four at a time: the small models leave the GPU mostly idle, and the time is short.
      # The build's CTest resource spec counts the cores of the machine it was configured
      # on (tests/test_cores.cmake): this machine's own, or the tests would queue for 2.
      spec=$log_dir/test_resources.json
      printf '{"version": {"major": 1, "minor": 0}, "local": [{"cores": [{"id": "0", "slots": %d}], "idle": [{"id": "0", "slots": 2}]}]}\n' \
        "$(nproc)" > "$spec"
      run_logged ctest_gpu ctest --test-dir build -L gpu --output-on-failure -j "${GPU_TEST_JOBS:-4}" --resource-spec-file "$spec" ;;
    bench)
      # Host rows first, then device rows, same sizes: the cost of staging is their ratio.
      for be in mpi tcp; do
        for dev in cpu cuda; do
          for np in 2 4; do
            run_logged "bench_${be}_${dev}_np${np}" "${mpi[@]}" -np $np build/bin/comm_bench -b 8 -e 256M -f 16 \
              -n 10 -w 3 -c 1 --backend $be --device $dev
          done
        done
      done
      for coll in allreduce reduce_scatter allgather broadcast; do
        run_logged "bench_nccl_cuda_np1_$coll" "${mpi[@]}" -np 1 build/bin/comm_bench -b 8 -e 256M -f 16 \
          -n 20 -w 5 -c 1 --backend nccl --device cuda --coll $coll
      done ;;
    train)
      # The same jobs on CPU and GPU (2 ranks share the GPU; nccl needs a GPU per rank,
      # so it runs 1 rank); the final line of each holds samples_per_s and tokens_per_s.
      steps=${TRAIN_STEPS:-60}
      common=(--steps "$steps" --log-every 20 --max-eval-samples 2000)
      for model in mlp gpt; do
        args=("${common[@]}" --model $model --batch-size ${TRAIN_BATCH:-64})
        for dev in cpu cuda; do
          run_logged "train_${model}_tcp_${dev}" "${mpi[@]}" -np 2 build/bin/train "${args[@]}" --backend tcp --device $dev
        done
        run_logged "train_${model}_mpi_cuda" "${mpi[@]}" -np 2 build/bin/train "${args[@]}" --backend mpi --device cuda
        run_logged "train_${model}_nccl_cuda_np1" "${mpi[@]}" -np 1 build/bin/train "${args[@]}" --backend nccl --device cuda
        for stage in 1 2 3; do
          run_logged "train_${model}_zero${stage}_tcp_cuda" "${mpi[@]}" -np 2 build/bin/train "${args[@]}" --backend tcp \
            --device cuda --zero $stage
        done
        # Device-resident: optimizer, clipping and state on the GPU (--optimizer-device cuda).
        run_logged "train_${model}_resident_tcp_cuda" "${mpi[@]}" -np 2 build/bin/train "${args[@]}" --backend tcp \
          --device cuda --optimizer-device cuda
        run_logged "train_${model}_resident_nccl_cuda_np1" "${mpi[@]}" -np 1 build/bin/train "${args[@]}" --backend nccl \
          --device cuda --optimizer-device cuda
      done
      # A larger batch: the GPU's share of the step grows with it.
      for dev in cpu cuda; do
        run_logged "train_mlp_b512_tcp_${dev}" "${mpi[@]}" -np 2 build/bin/train "${common[@]}" --model mlp \
          --batch-size 512 --backend tcp --device $dev
      done
      echo "== final lines"
      grep -H "^final:" "$log_dir"/train_*.log | sed 's|.*/train_||' ;;
    edges)
      # Mixed precision, checkpoint and resume, a backend switch on the GPU, and the
      # refusals (a model without CUDA kernels; NCCL with more ranks than GPUs).
      short=(--steps 20 --log-every 10 --max-eval-samples 500 --model gpt)
      for dev in cpu cuda; do
        run_logged "edge_bf16_zero2_$dev" "${mpi[@]}" -np 2 build/bin/train "${short[@]}" --backend tcp --device $dev \
          --precision bf16 --zero 2
      done
      ck=$(mktemp -d)
      run_logged edge_save_cuda "${mpi[@]}" -np 2 build/bin/train "${short[@]}" --backend tcp --device cuda \
        --checkpoint-dir "$ck" --save-every 10
      run_logged edge_resume_cuda "${mpi[@]}" -np 2 build/bin/train "${short[@]/20/30}" --backend tcp --device cuda \
        --checkpoint-dir "$ck" --resume
      run_logged edge_uninterrupted_cuda "${mpi[@]}" -np 2 build/bin/train "${short[@]/20/30}" --backend tcp --device cuda
      run_logged edge_switch_cuda "${mpi[@]}" -np 2 build/bin/train "${short[@]}" --backend tcp --device cuda \
        --switch-backend 10:mpi
      run_logged edge_cnn_cuda "${mpi[@]}" -np 1 build/bin/train --model cnn --device cuda --steps 20 --log-every 10
      run_logged edge_nccl_np2_one_gpu "${mpi[@]}" -np 2 build/bin/train --model mlp --backend nccl --device cuda --steps 2
      echo "== edge final lines and errors"
      grep -H -E "^final:|error|train:" "$log_dir"/edge_*.log | sed 's|.*/edge_||' | cut -c1-300 ;;
    resnet)
      # ResNet-18 (cifar stem) at batch 256 on Fashion-MNIST zero-padded to 32x32, one
      # rank: the GPU (cuDNN, device-resident SGD) in fp32 and in fp16 (fp16 convolutions
      # on tensor cores, the loss scaler on the device), and the CPU in fp32; the final
      # lines' rates, and one summary line each (resnet18 samples_per_s=...).
      rn=(--model resnet18 --resnet-stem cifar --image-size 32 --batch-size 256 --log-every 10 --max-eval-samples 512
          --momentum 0.9)
      for prec in fp32 fp16; do
        run_logged "resnet_cuda_$prec" "${mpi[@]}" -np 1 build/bin/train "${rn[@]}" --steps "${RESNET_STEPS:-30}" \
          --backend nccl --device cuda --optimizer-device cuda --precision "$prec" --metrics-out "$log_dir/resnet_$prec.jsonl"
      done
      run_logged resnet_cpu "${mpi[@]}" -np 1 build/bin/train "${rn[@]}" --steps 3 --backend tcp --device cpu
      grep -H "^final:" "$log_dir"/resnet_*.log | sed 's|.*/resnet_||' | cut -c1-200
      card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '_')
      for f in "$log_dir"/resnet_cuda_fp32.log "$log_dir"/resnet_cuda_fp16.log "$log_dir"/resnet_cpu.log; do
        rate=$(grep -o "samples/s [0-9.]*\|samples_per_s=[0-9.]*" "$f" | tail -1 | grep -o "[0-9.]*$")
        line="ours resnet18 samples_per_s=${rate:-none} card=${card:-unknown} B=256 image=32x32 run=$(basename "$f" .log)"
        note "$line"; echo "$line"
      done ;;
    llmc)
      # The llm.c anchor (docs/gpu.md): llm.c's train_gpt2cu (tools/llmc_build.sh) on the
      # fortunes as llm.c token files (build/bin/llmc_data), both carried in build/llmc by
      # gpu_bundle.sh. GPT-2 124M from llm.c's random init (-e d12), B=16 T=1024, bf16 (the
      # precision it was built with), one GPU, llm.c's other defaults (AdamW lr 3e-4,
      # recompute 1, no ZeRO). Validation only at the first and last step (2 batches), no
      # sampling (-s 0: there is no gpt2_tokenizer.bin, llm.c only warns). The one-line
      # summary (tools/llmc_summary.sh) goes to $log_dir/llmc_summary.txt.
      llmc=build/llmc
      if [[ ! -x $llmc/train_gpt2cu || ! -f $llmc/fortunes_train.bin || ! -f $llmc/fortunes_val.bin ]]; then
        echo "llmc missing: $llmc/train_gpt2cu or $llmc/fortunes_{train,val}.bin; build them here with tools/llmc_build.sh and tools/gpu_bundle.sh" |
          tee "$log_dir/llmc_summary.txt"
        note "$(printf '%-34s rc=%s' llmc missing)"
      else
        sample_memory "$log_dir/llmc_smi.txt"
        run_logged llmc "$llmc/train_gpt2cu" -i "$llmc/fortunes_train.bin" -j "$llmc/fortunes_val.bin" -e d12 \
          -b 16 -t 1024 -x "${LLMC_STEPS:-50}" -v 1000000 -m 2 -s 0
        stop_sampling
        if { bash tools/llmc_summary.sh "$log_dir/llmc.log" | sed "s/\$/ peak_mib=$(sort -n "$log_dir/llmc_smi.txt" | tail -1)/"; } \
             >"$log_dir/llmc_summary.txt" 2>&1 && grep -q "^llmc tokens_per_s=" "$log_dir/llmc_summary.txt"; then
          note "$(cat "$log_dir/llmc_summary.txt")"
        else
          note "llmc summary failed: $(cat "$log_dir/llmc_summary.txt")"
        fi
        cat "$log_dir/llmc_summary.txt"
      fi
      # Our side, the same model, B and T on the same card: train's GPT-2 124M (random
      # init, the fortunes through our tokenizer), 1 rank over nccl, device-resident
      # (--optimizer-device cuda: AdamW on the GPU, nothing over PCIe in a step), bf16
      # products on tensor cores (cuBLASLt) as llm.c's, and fp32 for reference. Summary
      # lines: tools/gpt2_gpu_summary.sh (tokens/s without the first step, MFU, peak memory).
      # No dropout, as llm.c has none (our gpt2 defaults to Hugging Face's 0.1). Attention
      # runs fused (at bf16 on tensor cores, at fp32 on the CUDA cores; memory O(T));
      # bf16_materialized is the same bf16 run with the T x T scores through cuBLASLt
      # (DPT_CUDA_ATTENTION=materialized), to compare the two.
      for variant in bf16 fp32 bf16_materialized; do
        prec=${variant%%_*}
        attention=fused; [[ $variant == *_materialized ]] && attention=materialized
        sample_memory "$log_dir/ours_${variant}_smi.txt"
        DPT_CUDA_ATTENTION=$attention run_logged "ours_gpt2_124m_$variant" "${mpi[@]}" -x DPT_CUDA_ATTENTION -np 1 \
          build/bin/train --model gpt2 --gpt2-size 124M \
          --batch-size 16 --seq-len 1024 --steps "${OURS_STEPS:-10}" --log-every 1 --max-eval-samples 16 \
          --backend nccl --device cuda --optimizer-device cuda --optimizer adamw --lr 3e-4 --precision "$prec" \
          --dropout 0 --metrics-out "$log_dir/ours_$variant.jsonl"
        stop_sampling
        if bash tools/gpt2_gpu_summary.sh "$log_dir/ours_$variant.jsonl" "$log_dir/ours_gpt2_124m_$variant.log" 16 1024 \
             "$prec" 1 "$log_dir/ours_${variant}_smi.txt" | sed "s/\$/ attention=$attention/" \
             >"$log_dir/ours_${variant}_summary.txt" 2>&1 && grep -q "^ours tokens_per_s=" "$log_dir/ours_${variant}_summary.txt"; then
          note "$(cat "$log_dir/ours_${variant}_summary.txt")"
        else
          note "ours $variant summary failed: $(cat "$log_dir/ours_${variant}_summary.txt")"
        fi
        cat "$log_dir/ours_${variant}_summary.txt"
      done ;;
    curves)
      # bf16 against fp32 over 100 steps of GPT-2 124M, the same init and data (B=8, T=512
      # to fit the device time): every step's loss within 2% (compare_runs --rtol 0.02).
      for prec in fp32 bf16; do
        run_logged "curve_$prec" "${mpi[@]}" -np 1 build/bin/train --model gpt2 --gpt2-size 124M --batch-size 8 \
          --seq-len 512 --steps "${CURVE_STEPS:-100}" --log-every 1 --max-eval-samples 8 --backend nccl --device cuda \
          --optimizer-device cuda --optimizer adamw --lr 3e-4 --precision "$prec" --dropout 0 \
          --metrics-out "$log_dir/curve_$prec.jsonl"
      done
      run_logged curves_compare build/bin/compare_runs --metrics "$log_dir/curve_fp32.jsonl" "$log_dir/curve_bf16.jsonl" \
        --rtol 0.02 ;;
    *) echo "gpu_verify: unknown step '$step' (probe tests bench train edges resnet llmc curves)" >&2; exit 2 ;;
  esac
done
echo; echo "== summary"; printf '%s\n' "${summary[@]}"
