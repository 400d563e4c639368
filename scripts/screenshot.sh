#!/usr/bin/env bash
# Renders the viewer headless: Xvfb + Mesa's software GL (llvmpipe) +
# eframe's glow backend.
#
#   scripts/screenshot.sh [TRACE...]   first frame -> assets/screenshot.png
#                                      (no TRACE: the bundled trace in traces/)
#   scripts/screenshot.sh --steps      one step of fsdp-ref, rank 0, serial and
#                                      overlapped -> assets/step-serial.png,
#                                      assets/step-overlap.png (README)
#   scripts/screenshot.sh --compare    serial vs overlapped fsdp-ref side by
#                                      side, Compare tab -> assets/compare.png
#   scripts/screenshot.sh --metrics    one step of fsdp-ref recorded with
#                                      --gpu-metrics: the counter lanes ->
#                                      assets/metrics.png
#   scripts/screenshot.sh --html       report --format html of the bundled
#                                      trace in headless chromium ->
#                                      assets/report-html.png
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--html" ]]; then
    command -v chromium >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
    cargo build -p streamscope
    page=$(mktemp -d)/report.html
    target/debug/streamscope report "${TRACE:-traces/torch-fsdp2-h200x2}" --format html -o "$page"
    chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$(mktemp -d)" --hide-scrollbars --window-size="${SIZE:-1400,1650}" \
        --screenshot="$PWD/assets/report-html.png" "file://$page"
    echo "wrote assets/report-html.png"
    exit 0
fi

pkgs=(xvfb xauth libgl1-mesa-dri libegl1 libxcursor1 libxi6 libxkbcommon-x11-0)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
fi

cargo build -p streamscope
mkdir -p assets
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
chmod 700 "$XDG_RUNTIME_DIR"
shot() { # OUT WxH ARGS...
    local out=$1 size=$2
    shift 2
    xvfb-run -a -s "-screen 0 ${size}x24" \
        target/debug/streamscope view --screenshot "$out" --size "$size" "$@"
    echo "wrote $out"
}

if [[ "${1:-}" == "--steps" ]]; then
    # The same step of both runs (after fsdp-ref's 3 warm-up steps), rank 0.
    step="${STEP:-6}"
    shot assets/step-serial.png 1400x900 traces/fsdp-ref-serial-h200x2 --step "$step" --rank 0
    shot assets/step-overlap.png 1400x900 traces/fsdp-ref-overlap-h200x2 --step "$step" --rank 0
elif [[ "${1:-}" == "--metrics" ]]; then
    shot assets/metrics.png 1400x820 traces/fsdp-ref-serial-metrics-h200 --step "${STEP:-10}"
elif [[ "${1:-}" == "--compare" ]]; then
    shot assets/compare.png 1600x1000 --compare traces/fsdp-ref-serial-h200x2 traces/fsdp-ref-overlap-h200x2 --step "${STEP:-6}" --rank 0
else
    shot assets/screenshot.png 1600x1000 "$@"
fi
