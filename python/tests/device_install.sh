# shellcheck shell=bash
# Sourced by run_device.sh and run_harnesses.sh: installing kindex and FlashInfer on a GPU host without network.
# Uses $python (the interpreter) and appends to the file named by $env_log, both set by the caller.
: "${python:?set by the caller}" "${env_log:?set by the caller}"

# print_env [MODULE...]: date, commit, Python, torch, triton and the modules named (their versions), CUDA and the
# device, nvcc.
print_env() {
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse HEAD 2>/dev/null || echo unknown)"
    "$python" - torch triton "$@" <<'EOF'
import importlib, platform, sys
print("python:", platform.python_version())
for name in sys.argv[1:]:
    try:
        m = importlib.import_module(name)
        print(f"{name}: {getattr(m, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        print(f"{name}: not importable ({type(e).__name__})")
import torch
print("cuda:", torch.version.cuda, "| device:", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
EOF
    nvcc --version 2>/dev/null | tail -1 || echo "nvcc: none"
  } | tee -a "$env_log"
}

# install_kindex SCRATCH [LIBRARY]: pip-installs this checkout's package into SCRATCH/site (no build isolation,
# no dependencies, no index: the host's torch, scikit-build-core and CMake as they are), packaging the prebuilt
# LIBRARY (libkindex.so) if given, else building libkindex.so with nvcc (KINDEX_CUDA_ARCHS, default 90a); puts
# SCRATCH/site first on PYTHONPATH and prints where kindex imports from.
install_kindex() {
  local scratch=$1 library=${2:-} repo
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  local defines=(-C cmake.define.KINDEX_CUDA=ON -C "cmake.define.KINDEX_CUDA_ARCHS=${KINDEX_CUDA_ARCHS:-90a}")
  if [[ -n $library ]]; then
    [[ -f $library ]] || { echo "install_kindex: $library: no such file" >&2; return 2; }
    defines=(-C "cmake.define.KINDEX_PYTHON_PREBUILT_LIBRARY=$library")
  fi
  echo "== pip install kindex ${library:+(prebuilt $library)}" | tee -a "$env_log"
  local start=$SECONDS
  "$python" -m pip install --no-index --no-build-isolation --no-deps --disable-pip-version-check --target \
    "$scratch/site" -C build-dir="$scratch/build" "${defines[@]}" "$repo" 2>&1 | tail -n 5 | tee -a "$env_log"
  echo "pip install: $((SECONDS - start)) s" | tee -a "$env_log"
  export PYTHONPATH="$scratch/site${PYTHONPATH:+:$PYTHONPATH}"
  env -u KINDEX_LIBRARY "$python" -c "import kindex; print('kindex', kindex.__file__, kindex.version())" \
    | tee -a "$env_log"
}

# install_flashinfer DIR SCRATCH: FlashInfer from carried wheels: DIR/install.sh is sourced if present (it sets up
# the JIT environment), otherwise the wheels DIR/*.whl are installed into SCRATCH/fisite.
install_flashinfer() {
  local dir=$1 scratch=$2
  echo "== FlashInfer from $dir" | tee -a "$env_log"
  if [[ -f $dir/install.sh ]]; then
    # shellcheck disable=SC1091
    FISITE="$scratch/fisite" FIWS="$scratch/fiws" PYTHON="$python" source "$dir/install.sh" 2>&1 | tee -a "$env_log"
    # install.sh exports its environment when sourced, but not through the pipe above: source its env file.
    # shellcheck disable=SC1091
    [[ -f $scratch/fisite/env.sh ]] && source "$scratch/fisite/env.sh"
  else
    "$python" -m pip install -q --no-index --no-deps --no-compile --target "$scratch/fisite" "$dir"/*.whl
    export PYTHONPATH="$scratch/fisite:$PYTHONPATH"
  fi
}
