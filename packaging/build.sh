#!/usr/bin/env bash
# Builds Foresay's one-folder desktop app for this platform into dist/foresay (Linux, macOS;
# on Windows run `python packaging\build.py` in a virtual environment, see docs/packaging.md).
#
#   bash packaging/build.sh             # dist/foresay/{foresay,foresay-gui,_internal}
#   bash packaging/build.sh --tarball   # Linux: also dist/foresay-VERSION-linux-ARCH.tar.gz
#
# The bundle takes the torch of .venv: set FORESAY_TORCH before the first bootstrap to build
# a GPU app (docs/packaging.md, "CPU or GPU torch").
set -euo pipefail
cd "$(dirname "$0")/.."
bash packaging/bootstrap.sh install
.venv/bin/python -c "import PyInstaller" 2>/dev/null || .venv/bin/python -m pip -q install -e ".[dev,package]"
exec .venv/bin/python packaging/build.py "$@"
