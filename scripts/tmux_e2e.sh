#!/usr/bin/env bash
# End-to-end check of the TUI in a real terminal (tmux, 120x40, 256 colours):
# opens real samples from ../shared/samples, presses keys, and checks the captured screen for the
# CUDA API row, the CUDA HW row, the queue sparkline, the idle row (x and > step its gaps) and the
# small-kernel table; then checks that a
# loading error prints the CLI's one-line message and exits with status 2.
#
#   scripts/tmux_e2e.sh [SAMPLES_DIR]        (default: ../shared/samples next to the repository)
# Exit status 0 when every check passes; 77 when tmux or the samples are missing (skip).
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
samples="${1:-$here/../shared/samples}"
py="${PYTHON:-python}"
sess="launchtui-e2e-$$"
sock="launchtui-e2e-$$"          # a private tmux server: other sessions on the machine cannot disturb it
fail=0
command -v tmux >/dev/null || { echo "SKIP: tmux not installed"; exit 77; }
[ -d "$samples" ] || { echo "SKIP: samples not found at $samples"; exit 77; }
export XDG_CACHE_HOME="$(mktemp -d)"
# the TUI sizes itself from its pane; exported COLUMNS/LINES (pytest-xdist's workers set 80x24)
# would override the pane's size (Textual asks shutil.get_terminal_size, which reads them first)
unset COLUMNS LINES
tm() { tmux -L "$sock" "$@"; }
trap 'tm kill-server 2>/dev/null; rm -rf "$XDG_CACHE_HOME"' EXIT

cap() { tm capture-pane -p -t "$sess"; }
wait_for() {  # wait_for REGEX [seconds]
  local end=$((SECONDS + ${2:-30}))
  while [ $SECONDS -lt $end ]; do cap | grep -qE "$1" && return 0; sleep 0.2; done
  echo "TIMEOUT waiting for /$1/"; cap; return 1
}
check() {  # check NAME REGEX [seconds]: polls, so a slow machine only makes it slower
  local end=$((SECONDS + ${3:-10}))
  while :; do
    if cap | grep -qE "$2"; then echo "ok   $1"; return 0; fi
    [ $SECONDS -ge $end ] && break
    sleep 0.2
  done
  echo "FAIL $1  (no /$2/ on screen)"; cap | sed 's/^/     | /'; fail=1
}
n=0
new_session() {  # the next case's session is made before the last one is killed: killing the only
  # session makes the server exit, and a new-session racing that exit found no server (seen under load)
  local old="$sess"; n=$((n + 1)); sess="launchtui-e2e-$$-$n"
  tm new-session -d -s "$sess" "$@"
  [ "$n" -gt 1 ] && tm kill-session -t "$old" 2>/dev/null
  return 0
}
open_trace() {  # open_trace TRACE [COLS ROWS]
  new_session -x "${2:-120}" -y "${3:-40}" -e TERM=xterm-256color -e PYTHONPATH="$here" \
    "cd '$here' && $py -m launchtui '$1'; echo \"EXIT=\$?\"; sleep 60"
  wait_for 'q Quit' 60 && wait_for 'Launches' 60
}
settle() {  # until two captures 0.1 s apart agree (at most ~1 s): the app has drawn what it was sent
  local prev cur i
  prev=$(cap)
  for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.1; cur=$(cap); [ "$cur" = "$prev" ] && return 0; prev=$cur; done
}
changed() {  # changed BEFORE: until the screen differs from BEFORE (at most ~2 s), then settle
  local i
  for i in $(seq 1 40); do [ "$(cap)" != "$1" ] && break; sleep 0.05; done
  settle
}
# keys go in order (the app handles one key event at a time); the checks after them poll. After
# Escape a pause longer than the terminal's escape delay: Escape and a quick next key read as Alt+key
keys() {
  for k in "$@"; do tm send-keys -t "$sess" "$k"; if [ "$k" = Escape ]; then sleep 0.4; else sleep 0.05; fi; done
  settle
}

echo "== V100 Kineto (stream 7 saturates at 1022 pending)"
if open_trace "$samples/kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"; then
  check "API row"               '^▶?API +1102 '
  check "HW row"                '^▶?HW +s7 '
  check "queue sparkline"       '^▶?q s7 +1022! +.*[▁▂▃▄▅▆▇]+.*█'
  check "table"                 'Kernel +Launches +API avg +Kernel avg +total API ms'
  check "table row"             'computeOffsetsKernel +235'
  check "footer"                'q Quit +\? Help'
  check "idle row"              '^▶?idle by cause +.*[-?~>|=*]' 60
  keys x
  check "x: largest gap"        '[a-z] [0-9.]+ [mµn]?s in gap 1 of (the )?[0-9,]+'
  keys ">"
  check "> : next smaller gap"  'in gap 2 of (the )?[0-9,]+'
  keys g b b b b b
  check "b: episode/spike"      '(episode|mark) [0-9]+/[0-9]+'
  keys g
  for i in $(seq 1 40); do   # each b steps once: wait for its screen before looking
    before=$(cap); tm send-keys -t "$sess" b; changed "$before"
    cap | grep -q 'queue saturated on GPU 0 stream 7' && break
  done
  check "b: saturated episode"  'queue saturated on GPU 0 stream 7'
  check "queue row selected"    '^▶q s7'
  cap > "${E2E_CAPTURE:-/dev/null}"
  keys + + Tab 2
  check "sorted by Launches"    'Launches▼'
  keys "?"
  check "help screen"           'launchtui keys'
  keys Escape q
  wait_for 'EXIT=0' 10 && echo "ok   q quits (status 0)" || fail=1
else fail=1; fi

echo "== H100 Nsight (2 GPUs)"
if open_trace "$samples/nsys/nsys-ai__h100_2gpu_1s.sqlite"; then
  check "GPU 0 group"           '━ GPU 0 ━'
  check "idle row"              '^▶?idle by cause +.*[-?~>|=*]' 60
  check "API row"               '^▶?API +111 '
  check "HW row"                '^▶?HW +s7 '
  keys j                        # the rows below the idle row scroll into view
  check "queue sparkline"       '^▶?q s7 +753 +.*[▁▂▃▄▅▆▇]'
  keys j j
  check "GPU 1 group"           '━ GPU 1 ━'
  check "table"                 'vectorized_elementwise_kernel +437 +282\.2'
  keys d
  check "d: one device"         'device shown: 0'
  keys O
  check "O without optimizer"   'no optimizer range'
  keys q
  wait_for 'EXIT=0' 10 && echo "ok   q quits (status 0)" || fail=1
else fail=1; fi

echo "== H100 Nsight at 80x24 (the table keeps its ranking columns; the device leads the name)"
if open_trace "$samples/nsys/nsys-ai__h100_2gpu_1s.sqlite" 80 24; then
  check "ranking columns"       'Kernel .*Launches +API avg +Kernel avg +total API ms'
  check "device in name"        '^GPU1 vectorized_ele.*437 +282\.0'
  check "rows hint"             'rows? (above|below)'
  cap > "${E2E_CAPTURE_80:-/dev/null}"
  keys Tab Right Right
  check "sideways scroll"       'max API|queue count'
  keys q
  wait_for 'EXIT=0' 10 && echo "ok   q quits (status 0)" || fail=1
else fail=1; fi

echo "== loading error"
new_session -x 120 -y 40 -e TERM=xterm-256color -e PYTHONPATH="$here" \
  "cd '$here' && $py -m launchtui /nonexistent/trace.sqlite; echo \"EXIT=\$?\"; sleep 60"
if wait_for 'EXIT=' 30; then
  check "one-line error"        '^launchtui: /nonexistent/trace.sqlite: no such file$'
  check "exit status 2"         'EXIT=2'
else fail=1; fi

[ $fail -eq 0 ] && echo "ALL OK" || echo "FAILED"
exit $fail
