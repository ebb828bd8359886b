# The torch build for this machine; sourced by packaging/bootstrap.sh (and its test).
#
# PyPI's torch wheel for Linux is the CUDA build (gigabytes of CUDA libraries); machines without
# an NVIDIA GPU get PyTorch's CPU build from its CPU index instead, and the default index when that
# index cannot be reached. FORESAY_TORCH (pip arguments: a requirement, options such as
# --index-url) overrides the choice.
TORCH_REQUIREMENT="torch==2.13.0"
TORCH_CPU_INDEX=${FORESAY_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
NVIDIA_PROC=${FORESAY_NVIDIA_PROC:-/proc/driver/nvidia/version}

has_nvidia_gpu() {
  [ -e "$NVIDIA_PROC" ] && return 0
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

# install_torch PIP_COMMAND...: installs torch with the given pip command (e.g. python -m pip -q)
install_torch() {
  if [ -n "${FORESAY_TORCH:-}" ]; then
    local chosen
    read -ra chosen <<< "$FORESAY_TORCH"
    "$@" install "${chosen[@]}"
  elif has_nvidia_gpu; then
    "$@" install "$TORCH_REQUIREMENT"
  else
    echo "no NVIDIA GPU: installing torch's CPU build from $TORCH_CPU_INDEX"
    if ! "$@" install --retries 1 --timeout 15 --index-url "$TORCH_CPU_INDEX" "$TORCH_REQUIREMENT"; then
      echo "note: $TORCH_CPU_INDEX cannot be reached; installing torch from the default index" \
           "(on Linux its CUDA build, gigabytes larger)" >&2
      "$@" install "$TORCH_REQUIREMENT"
    fi
  fi
}
