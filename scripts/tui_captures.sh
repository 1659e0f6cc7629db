#!/usr/bin/env bash
# Plain-text captures of the TUI in a real terminal (tmux), one per size, for reviews and issue notes.
#
#   scripts/tui_captures.sh TRACE OUTDIR [COLSxROWS ...]      (default sizes: 80x24 160x50)
#
# Writes OUTDIR/<trace name>_<COLS>x<ROWS>.txt once the table is drawn. Uses a private tmux server
# and a throwaway cache; $PYTHON (default: python) runs launchtui from this checkout.
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
trace="$1"; out="$2"; shift 2
sizes=("$@"); [ ${#sizes[@]} -eq 0 ] && sizes=(80x24 160x50)
py="${PYTHON:-python}"
sock="launchtui-cap-$$"
command -v tmux >/dev/null || { echo "tmux not installed"; exit 77; }
mkdir -p "$out"
export XDG_CACHE_HOME="$(mktemp -d)"
trap 'tmux -L "$sock" kill-server 2>/dev/null; rm -rf "$XDG_CACHE_HOME"' EXIT
name="$(basename "$trace")"
for sz in "${sizes[@]}"; do
  w="${sz%x*}"; h="${sz#*x}"
  tmux -L "$sock" kill-session -t cap 2>/dev/null
  tmux -L "$sock" new-session -d -s cap -x "$w" -y "$h" -e TERM=xterm-256color -e PYTHONPATH="$here" \
    -e XDG_CACHE_HOME="$XDG_CACHE_HOME" "cd '$here' && $py -m launchtui '$trace'"
  for _ in $(seq 1 240); do
    tmux -L "$sock" capture-pane -p -t cap | grep -q 'Launches' && break; sleep 0.25
  done
  sleep 1      # the first repaint after the table
  tmux -L "$sock" capture-pane -p -t cap > "$out/${name}_${sz}.txt"
  tmux -L "$sock" send-keys -t cap q
  echo "wrote $out/${name}_${sz}.txt"
done
