#!/bin/bash
# Everything this project checks on a GPU, in one command (a lent GPU machine's time is short):
#   bash tests/gpu/run_on_gpu.sh          # from the repository root; logs go to $OUT (else ./gpu-out)
# The NCCL benchmark first (timings with the GPU otherwise idle), then the GPU suite, its cases in
# parallel processes (each one NCCL rank at world size 1 on the same GPU), then the reports it wrote.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
{
  date -u
  nvidia-smi -L
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda',
torch.version.cuda, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())), torch.cuda.get_device_name(0))"
} 2>&1 | tee "$OUT/gpu-env.txt"
timeout "${BENCH_S:-150}" python3 benchmarks/nccl_overhead.py --steady "${STEADY_S:-10}" --out "$OUT/nccl_overhead_gpu.json" 2>&1 \
  | tee "$OUT/nccl_overhead_gpu.log"
rm -rf /tmp/gpu-bt
timeout "${SUITE_S:-300}" python3 -m pytest -p no:cacheprovider -n "${JOBS:-10}" -v -rA --durations=0 \
  --basetemp=/tmp/gpu-bt --junitxml="$OUT/gpu-junit.xml" tests/gpu tests/integration/test_nccl.py 2>&1 \
  | tee "$OUT/gpu-suite.log"
# the reports, facts and stacks each case wrote (no stores, no sockets)
(cd /tmp/gpu-bt 2>/dev/null && find . -type f \( -name '*.json' -o -name '*.txt' -o -name '*.log' \) -size -2M \
  | tar czf "$OUT/gpu-dumps.tgz" -T -)
date -u
