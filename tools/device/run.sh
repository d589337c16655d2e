#!/usr/bin/env bash
# Runs on the GPU machine (DEVELOPERS.md, "GPU runs"), from the repository root, with ".devdeps"
# carried (tools/device/prepare.sh). Steps, in the order given:
#   setup    unpack the Debian dependencies into /opt/devroot; print the GPU and toolchain
#   build    build this tree (ltx + test_cuda) in build-dev; with .devdeps/base.tar.xz also the base
#            commit's ltx in build-base (ninja resumes where a previous call on a warm machine left)
#   test     the full test_cuda of this tree (TEST_FILTER: a --gtest_filter)
#   ab       base and this tree alternating: the 768x512 step twice each, 1536x1024 and the VAE once
#   kernels  ltx bench kernels (every harness) and the op profiler in both modes on the tiny preset
#   engine   ltx bench engine: jobs per minute through the resident engine (demo bundle), one at a
#            time vs batches of 4, distilled and one-stage at 768x512, 49 frames
#   memory   the full-size step at 768x512 and 1536x1024 (SIZES: a subset): bf16, fp8-cast, fp8,
#            --offload cpu
#   fp8ref   tools/parity/gen_fp8_reference.py (needs the reference unpacked in .ref, carried): the
#            official fp8-cast / fp8-scaled-mm fixtures, written to tests/fixtures and $OUT/fixtures
#   official tools/bench/official_quantized_step.py: the official step under fp8-cast and
#            fp8-scaled-mm (eager, compiled + CUDA graphs), JSON in $OUT
#   pipeline ltx bench pipeline: whole clips with full-size random weights (ltx23-22b: Gemma 3 12B,
#            the 22B transformer, upsampler, decoders), distilled and two-stage at 768x512x121 and
#            1536x1024x121. Estimated on one H100, each run 20-30 s of weight synthesis plus the
#            clip: distilled ~30 s (768) / ~60 s (1536), two-stage ~45 s (768) / ~120 s (1536):
#            about 5 minutes in all; each run is cut at 150 s so the step stays under 8 minutes.
#   pipeline-budget  the distilled 1536x1024x121 clip with each ';'-separated flag set of CASES
#            (default: --max-gpu-memory 24 and 16 with --offload cpu, and 24 with --offload cpu
#            --quantization fp8-cast; an empty set is the unconstrained run): peak memory and time
#            (estimated 1-2 minutes each, cut at 200 s).
#   pipeline-q4  the distilled 1536x1024x121 clip with the transformer's linears as Q4_K blocks
#            (--weights-format q4_k) and the text encoder as TE_FLAGS make it (default
#            --text-encoder-format fp8: ComfyUI's FP8 Gemma, held at a byte a weight; TE_FLAGS= for a
#            bf16 Gemma), under --max-gpu-memory 16 --offload cpu,
#            then the same unconstrained: peak memory and time of each (cut at 200 s each)
#   ggml     the full-size step with the transformer's linears as GGML blocks (FORMATS, default
#            q8_0 q6_k q4_k) next to the bf16 step, at SIZES (default 768x512 1536x1024)
#   coldstart `ltx bench cold-start` on the ltx23-22b files (`ltx bench write-models`: ~64 GB, written
#            into a tmpfs: page-cached by construction), 2 runs each of the distilled pipeline at
#            768x512x121 up to its first denoising step, then the official loader on the same
#            checkpoint (tools/bench/official_cold_start.py; needs .ref carried)
#   official-pipeline  tools/bench/official_pipeline.py (needs .ref carried): the official distilled
#            and two-stage pipelines (ltx-pipelines' own objects, random bf16 weights made inside
#            their builders, the ltx23-22b preset's configs) at SIZE (default 1536x1024) x121,
#            stage by stage, builds timed apart; run it in the same call as `pipeline` for the
#            comparison. PIPELINES (default both), OFFICIAL_ARGS (e.g. --skip decode). Estimated
#            4-6 minutes on one H100, cut at OFFICIAL_LIMIT (default 480 s); the JSON, rewritten
#            after every stage, and the log go to the logs archive
#   kernel   ltx bench kernels --filter KERNEL (default lora-fuse)
#   stepcache the two-stage 1536x1024x121 clip without step caching, with `--cache fbcache` at its
#            default threshold, and at --cache-threshold 1000 (every step after the warm-up
#            reused: the ceiling of the speed-up), one after another (each cut at 200 s)
#   sanitize compute-sanitizer memcheck (then racecheck on the attention kernels) over test_cuda
#            (SANITIZE_FILTER: a --gtest_filter for memcheck; each tool cut at SANITIZE_LIMIT s)
# Logs go to /tmp/devlogs, returned as one archive under $OUT (the tool returns at most 8 files).
set -uo pipefail
cd "$(dirname "$0")/../.."
RES=${OUT:-/tmp/out}
LOG=/tmp/devlogs
mkdir -p "$LOG" "$RES"
trap 'tar -C /tmp -czf "$RES/logs_$(date +%H%M%S).tgz" devlogs' EXIT
D=/opt/devroot
export PATH=$D/usr/bin:$PATH
export PKG_CONFIG_PATH=$D/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig:$D/usr/lib/x86_64-linux-gnu/pkgconfig:$D/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$D
export LD_LIBRARY_PATH=$D/usr/lib/x86_64-linux-gnu/openblas-pthread:$D/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DLTX_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a
            -DLTX_FFMPEG=OFF -DLTX_IMAGE_IO=OFF -DCMAKE_PREFIX_PATH=$D/usr)
# cuDNN is a system package there (seen: /usr/lib/x86_64-linux-gnu, headers in include/<arch>).
for inc in /usr/include/x86_64-linux-gnu /usr/include /usr/local/cuda/include; do
  if [ -f $inc/cudnn.h ]; then cmake_args+=(-DLTX_CUDNN_INCLUDE=$inc); break; fi
done

bench() {  # name binary args...
  local name=$1 bin=$2; shift 2
  "$bin" bench "$@" --device cuda --warmup 1 --iters 3 --out "$LOG/$name.json" > "$LOG/$name.txt" 2>&1
  echo "== $name"; grep -E "^bench: .*median|^(transformer|vae) |power-capped|rel L2 video|peak" "$LOG/$name.txt"
}

for step in "$@"; do
  case $step in
    setup)
      mkdir -p $D && tar -C $D -xJf .devdeps/devroot.tar.xz || exit 1
      nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv
      g++ --version | head -1; nvcc --version | tail -1; cmake --version | head -1
      ;;
    build)
      t0=$(date +%s)
      cmake -S . -B build-dev "${cmake_args[@]}" > "$LOG/cmake_dev.log" 2>&1 || { tail -40 "$LOG/cmake_dev.log"; exit 1; }
      ninja -C build-dev ltx_cli test_cuda > "$LOG/build_dev.log" 2>&1 || { grep -A12 "error" "$LOG/build_dev.log" | head -80; exit 1; }
      if [ -f .devdeps/base.tar.xz ]; then
        mkdir -p .base && tar -C .base -xJf .devdeps/base.tar.xz
        cmake -S .base -B build-base "${cmake_args[@]}" -DLTX_BUILD_TESTS=OFF > "$LOG/cmake_base.log" 2>&1 || { tail -40 "$LOG/cmake_base.log"; exit 1; }
        ninja -C build-base ltx_cli > "$LOG/build_base.log" 2>&1 || { grep -A12 "error" "$LOG/build_base.log" | head -60; exit 1; }
      fi
      echo "build: $(( $(date +%s) - t0 )) s"
      ;;
    test)
      ./build-dev/tests/test_cuda ${TEST_FILTER:+--gtest_filter=$TEST_FILTER} > "$LOG/test_cuda.log" 2>&1
      grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran" "$LOG/test_cuda.log" | tail -40
      grep -E -A4 "^DIAG|: Failure" "$LOG/test_cuda.log" | head -80
      ;;
    ab)
      B=./build-base/ltx N=./build-dev/ltx
      bench s768_base_1 $B transformer --size 768x512; bench s768_new_1 $N transformer --size 768x512
      bench s768_base_2 $B transformer --size 768x512; bench s768_new_2 $N transformer --size 768x512
      bench s1536_base $B transformer --size 1536x1024; bench s1536_new $N transformer --size 1536x1024
      bench vae_base $B vae; bench vae_new $N vae
      ;;
    kernels)
      ./build-dev/ltx bench kernels --device cuda > "$LOG/kernels.txt" 2>&1; echo "kernels rc=$?"
      for m in 1 events; do
        LTX_PROFILE_OPS=$m ./build-dev/ltx bench transformer --preset tiny --device cuda --warmup 1 \
          --iters 1 > "$LOG/profile_$m.txt" 2>&1; echo "profile $m rc=$?"
      done
      ;;
    engine)
      for p in distilled one-stage; do
        ./build-dev/ltx bench engine --device cuda --pipeline $p --size 768x512 --frames 49 \
          --jobs 8 --batch 1 --batch 4 --out "$LOG/engine_$p.json" > "$LOG/engine_$p.txt" 2>&1
        echo "engine $p rc=$?"; cat "$LOG/engine_$p.txt" | tail -6
      done
      ;;
    memory)
      N=./build-dev/ltx
      for s in ${SIZES:-768x512 1536x1024}; do
        bench ${s}_bf16 $N transformer --size $s
        bench ${s}_fp8cast $N transformer --size $s --quantization fp8-cast
        bench ${s}_fp8 $N transformer --size $s --quantization fp8
        bench ${s}_offload $N transformer --size $s --offload cpu
      done
      ;;
    fp8ref)
      mkdir -p "$RES/fixtures"
      PYTHONPATH=.ref/packages/ltx-core/src:.ref/packages/ltx-pipelines/src \
        python3 tools/parity/gen_fp8_reference.py --fixtures tests/fixtures --out "$RES/fixtures" \
        > "$LOG/fp8ref.txt" 2>&1
      echo "fp8ref rc=$?"; tail -25 "$LOG/fp8ref.txt"; ls -la "$RES/fixtures"
      cp "$RES"/fixtures/* tests/fixtures/ 2>/dev/null
      ;;
    official)
      LTX_REF=.ref OUT="$RES" python3 tools/bench/official_quantized_step.py > "$LOG/official_q.txt" 2>&1
      echo "official rc=$?"; tail -40 "$LOG/official_q.txt"
      ;;
    pipeline)
      for p in distilled two-stage; do
        for size in 768x512 1536x1024; do
          timeout 150 ./build-dev/ltx bench pipeline --device cuda --pipeline $p --size $size \
            --frames 121 --out "$LOG/pipeline_${p}_$size.json" > "$LOG/pipeline_${p}_$size.txt" 2>&1
          echo "pipeline $p $size rc=$?"
          grep -A14 "^ltx bench pipeline:" "$LOG/pipeline_${p}_$size.txt" || tail -5 "$LOG/pipeline_${p}_$size.txt"
        done
      done
      ;;
    ggml)
      N=./build-dev/ltx
      for s in ${SIZES:-768x512 1536x1024}; do
        bench ${s}_bf16 $N transformer --size $s
        for f in ${FORMATS:-q8_0 q6_k q4_k}; do bench ${s}_$f $N transformer --size $s --weights-format $f; done
      done
      ;;
    coldstart)
      df -h / /dev/shm 2>/dev/null | sed 's/^/  /'
      M=${MODELS_DIR:-/mnt/ltx-models}
      mkdir -p "$M"
      if ! mountpoint -q "$M"; then
        mount -t tmpfs -o size=80G tmpfs "$M" 2>/dev/null || { M=/dev/shm/ltx-models; mkdir -p $M; }
      fi
      # The files need ~70 GB: the first of the tmpfs, /dev/shm and the disk that has it.
      for cand in "$M" /dev/shm/ltx-models /tmp/ltx-models; do
        mkdir -p "$cand" && [ "$(df --output=avail -B1G "$cand" | tail -1)" -ge 72 ] && { M=$cand; break; }
      done
      echo "model files in $M"; df -h "$M" | tail -1
      t0=$(date +%s)
      ./build-dev/ltx bench write-models --preset ltx23-22b --dir "$M" > "$LOG/write_models.txt" 2>&1
      echo "write-models rc=$? in $(( $(date +%s) - t0 )) s"; tail -4 "$LOG/write_models.txt"
      ./build-dev/ltx bench cold-start --preset ltx23-22b --dir "$M" --device cuda --runs ${RUNS:-2} \
        ${COLD_ARGS:-} --out "$LOG/coldstart.json" > "$LOG/coldstart.txt" 2>&1
      echo "cold-start rc=$?"; grep -E "^run |\] ltx: |\] timings|\] (model|text|transformer)" "$LOG/coldstart.txt" | head -40
      if [ -d .ref ]; then
        LTX_REF=.ref timeout ${OFFICIAL_LIMIT:-300} python3 tools/bench/official_cold_start.py "$M/ltx23-22b-checkpoint.safetensors" \
          --runs ${RUNS:-2} --out "$LOG/official_cold_start.json" > "$LOG/official_cold_start.txt" 2>&1
        echo "official rc=$?"; tail -5 "$LOG/official_cold_start.txt"
      fi
      ;;
    official-pipeline)
      LTX_REF=.ref OUT="$RES" timeout ${OFFICIAL_LIMIT:-480} python3 tools/bench/official_pipeline.py \
        --pipeline ${PIPELINES:-both} --size ${SIZE:-1536x1024} --frames 121 ${OFFICIAL_ARGS:-} \
        --out "$LOG/official_pipeline.json" > "$LOG/official_pipeline.txt" 2>&1
      echo "official-pipeline rc=$?"
      if grep -q "SUMMARY" "$LOG/official_pipeline.txt"; then
        sed -n '/SUMMARY/,$p' "$LOG/official_pipeline.txt" | head -60
      else
        tail -30 "$LOG/official_pipeline.txt"
      fi
      ;;
    stepcache)
      for c in "" "--cache fbcache" "--cache fbcache --cache-threshold 1000"; do
        name=$(echo "$c" | tr -d ' -'); name=${name:-nocache}
        timeout 200 ./build-dev/ltx bench pipeline --device cuda --pipeline two-stage --size ${SIZE:-1536x1024} \
          --frames 121 $c --out "$LOG/stepcache_$name.json" > "$LOG/stepcache_$name.txt" 2>&1
        echo "stepcache '$c' rc=$?"
        grep -A16 "^ltx bench pipeline:" "$LOG/stepcache_$name.txt" || tail -5 "$LOG/stepcache_$name.txt"
      done
      ;;
    kernel)  # KERNEL: one harness of ltx bench kernels
      ./build-dev/ltx bench kernels --device cuda --filter ${KERNEL:-lora-fuse} > "$LOG/kernel_${KERNEL:-lora-fuse}.txt" 2>&1
      echo "kernel rc=$?"; cat "$LOG/kernel_${KERNEL:-lora-fuse}.txt" | tail -20
      ;;
    sanitize)
      CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
      timeout ${SANITIZE_LIMIT:-240} $CS --tool memcheck --leak-check full --error-exitcode 3 \
        ./build-dev/tests/test_cuda ${SANITIZE_FILTER:+--gtest_filter=$SANITIZE_FILTER} > "$LOG/memcheck.log" 2>&1
      echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|LEAK SUMMARY|tests ran|^\[  FAILED" "$LOG/memcheck.log" | tail -20
      timeout ${SANITIZE_LIMIT:-240} $CS --tool racecheck --racecheck-report analysis --error-exitcode 3 \
        ./build-dev/tests/test_cuda --gtest_filter='Cuda*Attention*:CudaReduce.*:CudaNorm.*' > "$LOG/racecheck.log" 2>&1
      echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|tests ran|^\[  FAILED" "$LOG/racecheck.log" | tail -20
      ;;
    pipeline-budget)
      IFS=';' read -ra cases <<< "${CASES:-"--max-gpu-memory 24 --offload cpu;--max-gpu-memory 16 --offload cpu;--max-gpu-memory 24 --offload cpu --quantization fp8-cast"}"
      for case in "${cases[@]}"; do
        name=$(echo "$case" | tr -d ' -'); name=${name:-unconstrained}
        timeout 200 ./build-dev/ltx bench pipeline --device cuda --pipeline distilled --size 1536x1024 \
          --frames 121 $case --out "$LOG/pipeline_budget_$name.json" \
          > "$LOG/pipeline_budget_$name.txt" 2>&1
        echo "pipeline $case rc=$?"
        grep -A14 "^ltx bench pipeline:" "$LOG/pipeline_budget_$name.txt" || tail -5 "$LOG/pipeline_budget_$name.txt"
      done
      ;;
    pipeline-q4)
      for case in "--max-gpu-memory 16 --offload cpu" ""; do
        name=$(echo "$case" | tr -d ' -'); name=${name:-unconstrained}
        timeout 200 ./build-dev/ltx bench pipeline --device cuda --pipeline distilled --size 1536x1024 \
          --frames 121 --weights-format q4_k ${TE_FLAGS---text-encoder-format fp8} $case --out "$LOG/pipeline_q4_$name.json" \
          > "$LOG/pipeline_q4_$name.txt" 2>&1
        echo "pipeline q4_k $case rc=$?"
        grep -A14 "^ltx bench pipeline:" "$LOG/pipeline_q4_$name.txt" || tail -5 "$LOG/pipeline_q4_$name.txt"
      done
      ;;
    *) echo "run.sh: unknown step $step (setup, build, test, ab, kernels, engine, memory, fp8ref, official, official-pipeline, pipeline, pipeline-budget, pipeline-q4, ggml, coldstart, kernel, stepcache, sanitize)"; exit 2 ;;
  esac
done
