#!/usr/bin/env bash
# The main job on the bundled real trace: build, print the report, open the
# viewer. With no display, the viewer renders its first frame headless to
# assets/demo.png instead (installing Xvfb and Mesa if needed).
# Usage: bash scripts/demo.sh [TRACE...]   (default: the torch FSDP2 trace in traces/)
# Builds streamscope and its collector (so that `record` works after it),
# wherever cargo puts them (CARGO_TARGET_DIR, .cargo/config): the binary's
# path is taken from cargo's own report of what it built.
# STREAMSCOPE_DEMO_VIEW=0: the report only, no viewer.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  set -- traces/torch-fsdp2-h200x2
  [ -d "$1" ] || { echo "no bundled trace: traces/torch-fsdp2-h200x2 is missing"; exit 2; }
fi
# cargo prints one JSON line per artifact; the binary's is the one whose
# "executable" ends in /streamscope. Diagnostics still go to the terminal.
built=$(cargo build --release -p streamscope -p streamscope-collector \
  --message-format=json-render-diagnostics)
bin=$(printf '%s\n' "$built" | grep -o '"executable":"[^"]*/streamscope"' | tail -n 1 \
  | sed 's/^"executable":"//; s/"$//')
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "demo: cargo did not report a streamscope binary (got: '${bin}')" >&2
  exit 2
fi
echo "== streamscope report $*"
"$bin" report "$@"
if [ "${STREAMSCOPE_DEMO_VIEW:-1}" = 0 ]; then
  exit 0
fi
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  echo "== streamscope view $*"
  exec "$bin" view "$@"
fi
echo "== no display: rendering the viewer headless to assets/demo.png"
pkgs=(xvfb xauth libgl1-mesa-dri libegl1 libxcursor1 libxi6 libxkbcommon-x11-0)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
chmod 700 "$XDG_RUNTIME_DIR"
mkdir -p assets
xvfb-run -a -s "-screen 0 1600x1000x24" "$bin" view --screenshot assets/demo.png --size 1600x1000 "$@"
echo "wrote assets/demo.png"
