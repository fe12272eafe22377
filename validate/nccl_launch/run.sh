#!/usr/bin/env bash
# Build validate/nccl_launch/nccl_launch.cu against the NCCL that PyTorch ships and run it on
# GPU 0: the host cost of one NCCL call issued from C (nccl-tests' loop) and its steady-state
# time on one rank. Usage: validate/nccl_launch/run.sh OUTFILE.json (needs nvcc and a GPU).
set -euo pipefail
out=${1:?usage: run.sh OUTFILE.json}
here=$(cd "$(dirname "$0")" && pwd)
nccl=$(python3 - <<'PY'
import importlib.util, os
for name in ("nvidia.nccl", "nvidia.nccl.lib"):
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:
        continue
    if spec and spec.submodule_search_locations:
        path = list(spec.submodule_search_locations)[0]
        print(path if os.path.isdir(os.path.join(path, "include")) else os.path.dirname(path))
        break
PY
)
lib=$(ls "$nccl"/lib/libnccl.so* | head -1)
build=$(mktemp -d)
ln -s "$lib" "$build/libnccl.so"
nvcc -O2 -std=c++17 -arch=sm_90 -I"$nccl/include" "$here/nccl_launch.cu" -L"$build" -lnccl \
  -Xlinker -rpath="$nccl/lib" -o "$build/nccl_launch"
NCCL_NVLS_ENABLE=0 "$build/nccl_launch" > "$out"
cat "$out"
