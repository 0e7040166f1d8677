#!/usr/bin/env bash
# How docs/images/traces-*.png were made (docs/traces.md). Needs Debian's chromium,
# gtkwave, xvfb, xdotool and imagemagick, and speedscope from npm; the tests do not.
#   bash docs/images/make_trace_screenshots.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
cd "$work"
npm install --silent speedscope >/dev/null
cp -r node_modules/speedscope/dist/release/* .
"$repo/.venv/bin/pkasim" profile "$repo/firmware/build/xrsa.elf" -q \
  --folded xrsa.folded --trace-events xrsa-trace.json --vcd xrsa.vcd
python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 & server=$!
sleep 1
shot() {  # URL-hash profile, output file
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1600,900 \
    --virtual-time-budget=30000 --screenshot="$2" "http://127.0.0.1:8765/index.html#profileURL=/$1&title=$1"
}
shot xrsa.folded "$repo/docs/images/traces-folded-speedscope.png"
shot xrsa-trace.json "$repo/docs/images/traces-trace-events-speedscope.png"
kill "$server"
cat > wave.tcl <<'TCL'
gtkwave::addSignalsFromList [list chip.core.sleeping chip.core.exception\[5:0\] chip.pka.busy chip.pka.opcode\[5:0\] chip.pka.irq chip.pka.done chip.systick.wrap chip.nvic.irq_pending\[31:0\] chip.nvic.systick_pending]
gtkwave::setZoomRangeTimes 100000000000 100160000000
TCL
Xvfb :77 -screen 0 1600x700x24 >/dev/null 2>&1 & xvfb=$!
sleep 1
DISPLAY=:77 gtkwave -S wave.tcl xrsa.vcd >/dev/null 2>&1 & wave=$!
sleep 10
DISPLAY=:77 import -window root -crop 1008x565+0+0 +repage "$repo/docs/images/traces-vcd-gtkwave.png"
kill "$wave" "$xvfb"
rm -rf "$work"
