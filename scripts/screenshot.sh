#!/usr/bin/env bash
# Renders the viewer's first frame to assets/screenshot.png, headless:
# Xvfb + Mesa's software GL (llvmpipe) + eframe's glow backend.
# Usage: scripts/screenshot.sh [TRACE...]   (no TRACE: the bundled trace in traces/)
set -euo pipefail
cd "$(dirname "$0")/.."

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
xvfb-run -a -s "-screen 0 1600x1000x24" \
    target/debug/streamscope view --screenshot assets/screenshot.png --size 1600x1000 "$@"
echo "wrote assets/screenshot.png"
