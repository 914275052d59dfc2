#!/usr/bin/env bash
# Assembles the embedded PTX for a real GPU with ptxas and prints registers, spills, stack and
# shared memory per kernel. Fails if the PTX does not assemble. Needs `pip install nvidia-cuda-nvcc`.
# Usage: scripts/ptx-report.sh [sm_90] [path/to/kernels.ptx]
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-sm_90}
ptx=${2:-}
if [ -z "$ptx" ]; then
  cargo build -q -p seisgpu-host   # (re)builds the PTX when kernel sources changed
  ptx=target/ptx/seisgpu-kernels.ptx
fi
ptxas=$(command -v ptxas || python3 -c 'import nvidia, os; d=os.path.dirname(nvidia.__path__[0]); import glob; print((glob.glob(os.path.join(nvidia.__path__[0], "cu*/bin/ptxas")) + glob.glob(os.path.join(nvidia.__path__[0], "cuda_nvcc/bin/ptxas")))[0])')
echo "ptxas: $ptxas"
echo "PTX:   $ptx ($(grep -c '^.visible .entry' "$ptx") kernels), target $arch"
"$ptxas" -arch="$arch" -v "$ptx" -o /dev/null 2>&1 | python3 "$(dirname "$0")/ptx_report.py"
