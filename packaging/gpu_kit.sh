#!/usr/bin/env bash
# The GPU kit: every GPU measurement of Foresay in one command on a lent GPU machine (docs/gpu.md).
#
#   bash packaging/gpu_kit.sh prepare    here, with network: fills .whl/ (ignored by git) with the
#                                        wheels the GPU image lacks, the spoken request, a carried
#                                        espeak-ng and the revision; prints the command to run there.
#                                        With FORESAY_ZONOS_SOURCE=DIR (a checkout of Zonos's git
#                                        repository, or its git directory) Zonos and what it
#                                        imports travel too (.whl/zonos)
#   bash packaging/gpu_kit.sh run [ARGS] there, from the repository root, .whl carried: installs the
#                                        wheels into /tmp/site and Foresay (editable), runs every
#                                        section (python -m foresay.app.bench.gpu_kit ARGS), writes
#                                        $OUT/gpu_kit.json and $OUT/gpu_kit.log
#   bash packaging/gpu_kit.sh dry-run    here: the same sections with small shapes on the CPU, in
#                                        the project's venv, into test-output/gpu-kit/
set -euo pipefail
cd "$(dirname "$0")/.."
KIT=.whl

prepare() {
    local python=.venv/bin/python
    [ -x "$python" ] || python=python3
    mkdir -p "$KIT"
    echo "== wheels the GPU image lacks (packaging/gpu_kit_wheels.py)"
    "$python" packaging/gpu_kit_wheels.py download "$KIT"
    echo "== the spoken request"
    rm -f "$KIT/request.wav"
    "$python" -c "from pathlib import Path; from foresay.app.bench.gpu_kit_sections import ensure_request; \
ensure_request(Path('$KIT/request.wav'))"
    echo "== espeak-ng for the replay's voice and Zonos's phonemes (English data only, audio output stubbed out)"
    carry_espeak "$KIT/espeak"
    rm -rf "$KIT/zonos"
    if [ -n "${FORESAY_ZONOS_SOURCE:-}" ]; then
        echo "== Zonos from $FORESAY_ZONOS_SOURCE, and the wheels it imports"
        carry_zonos "$FORESAY_ZONOS_SOURCE" "$KIT/zonos"
        "$python" packaging/gpu_kit_wheels.py download-zonos "$KIT/zonos/wheels"
    else
        echo "== Zonos: not carried (set FORESAY_ZONOS_SOURCE to a checkout of its repository); its section will skip"
    fi
    "$python" - "$KIT/kit.json" <<'EOF'
import json, subprocess, sys, time
def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()
json.dump({"revision": git("rev-parse", "HEAD"), "uncommitted_changes": bool(git("status", "--porcelain")),
           "prepared_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, open(sys.argv[1], "w"))
EOF
    echo "== what travels"
    du -sh "$KIT"
    echo "working tree: $(git ls-files -z --cached --others --exclude-standard | du -ch --files0-from=- | tail -1)"
    cat <<EOF

On a lent GPU machine, one call of the device tool's run:
  command: bash packaging/gpu_kit.sh run
  carry:   [".whl"]
  timeout_s: 600
It returns gpu_kit.json and gpu_kit.log under \$OUT.
EOF
}

carry_espeak() {  # the espeak-ng of this machine, runnable from a folder on a bare image
    local dest=$1 data
    data=$(espeak-ng --version | sed -n 's/.*Data at: *//p')
    [ -d "$data" ] || { echo "gpu_kit: espeak-ng's data folder not found" >&2; exit 1; }
    rm -rf "$dest"
    mkdir -p "$dest/bin" "$dest/lib" "$dest/share/espeak-ng-data/lang" "$dest/share/espeak-ng-data/voices"
    cp "$(command -v espeak-ng)" "$dest/lib/espeak-ng.bin"
    for lib in libespeak-ng.so.1 libsonic.so.0; do
        cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')" "$dest/lib/$lib"
    done
    gcc -shared -fPIC -O2 -o "$dest/lib/libpcaudio.so.0" -Wl,-soname,libpcaudio.so.0 packaging/pcaudio_shim.c
    cp "$data"/{phondata,phontab,phonindex,intonations,en_dict} "$dest/share/espeak-ng-data/"
    cp -r "$data/lang/gmw" "$dest/share/espeak-ng-data/lang/"
    cp -r "$data/voices/!v" "$dest/share/espeak-ng-data/voices/"
    cat >"$dest/bin/espeak-ng" <<'EOF'
#!/bin/sh
here=$(cd "$(dirname "$0")/.." && pwd)
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ESPEAK_DATA_PATH="$here/share" \
    exec "$here/lib/espeak-ng.bin" "$@"
EOF
    chmod +x "$dest/bin/espeak-ng"
    "$dest/bin/espeak-ng" -w "$dest/check.wav" "ready" && [ "$(head -c 4 "$dest/check.wav")" = RIFF ] \
        || { echo "gpu_kit: the carried espeak-ng does not speak" >&2; exit 1; }
    rm -f "$dest/check.wav"
}

carry_zonos() {  # the zonos package of a checkout or a git directory, its revision beside it
    local source=$1 dest=$2
    mkdir -p "$dest/src"
    if [ -d "$source/zonos" ]; then
        cp -r "$source/zonos" "$dest/src/"
        git -C "$source" rev-parse HEAD >"$dest/revision" 2>/dev/null || echo unknown >"$dest/revision"
    else
        git --git-dir="$source" archive HEAD zonos | tar -x -C "$dest/src"
        git --git-dir="$source" rev-parse HEAD >"$dest/revision"
    fi
    find "$dest/src" -name '__pycache__' -prune -exec rm -rf {} +
    [ -f "$dest/src/zonos/model.py" ] || { echo "gpu_kit: no zonos/model.py in $source" >&2; exit 1; }
}

run() {
    local out=${OUT:-$PWD/test-output/gpu-kit}
    mkdir -p "$out"
    [ -d "$KIT" ] || { echo "gpu_kit: no $KIT folder: run 'bash packaging/gpu_kit.sh prepare' here and carry .whl" >&2; exit 1; }
    local wheels=("$KIT"/*.whl)
    [ -d "$KIT/zonos/src" ] && wheels+=("$KIT"/zonos/wheels/*.whl)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "${wheels[@]}"
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    python3 -m pip install -q --no-deps --no-build-isolation -e .
    if ! command -v espeak-ng >/dev/null && [ -x "$KIT/espeak/bin/espeak-ng" ]; then
        export PATH="$PWD/$KIT/espeak/bin:$PATH"
        # Zonos phonemizes through the library itself
        export PHONEMIZER_ESPEAK_LIBRARY="$PWD/$KIT/espeak/lib/libespeak-ng.so.1" ESPEAK_DATA_PATH="$PWD/$KIT/espeak/share"
        export LD_LIBRARY_PATH="$PWD/$KIT/espeak/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    if [ -d "$KIT/zonos/src" ]; then
        export PYTHONPATH="$PWD/$KIT/zonos/src:$PYTHONPATH"
    fi
    export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | sed 's/^/[gpu kit] /' || true
    python3 -m foresay.app.bench.gpu_kit --out "$out" --request "$KIT/request.wav" --kit-info "$KIT/kit.json" \
        "$@" 2>&1 | tee "$out/gpu_kit.log"
}

dry_run() {
    local out=${OUT:-$PWD/test-output/gpu-kit} python=.venv/bin/python
    [ -x "$python" ] || python=python3
    mkdir -p "$out"
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$python" -m foresay.app.bench.gpu_kit --out "$out" --device cpu \
        --small "$@" 2>&1 | tee "$out/gpu_kit.log"
}

case "${1:-}" in
    prepare) prepare ;;
    run) shift; run "$@" ;;
    dry-run) shift; dry_run "$@" ;;
    *) echo "usage: bash packaging/gpu_kit.sh prepare | run [ARGS] | dry-run [ARGS]" >&2; exit 2 ;;
esac
