#!/usr/bin/env bash
# Records the terminal captures in editors/captures/ (shown in editors/README.md): Neovim,
# with editors/nvim/ on its runtimepath, in a real terminal (tmux), talking to `warden lsp`.
# Needs nvim, tmux and a built warden (cargo build).
set -euo pipefail
cd "$(dirname "$0")/.."
warden="${WARDEN:-$PWD/target/debug/warden}"
out=editors/captures
session="warden-capture-$$"
tmux kill-session -t "$session" 2>/dev/null || true
tmux new-session -d -s "$session" -x 150 -y 22 \
  "nvim --clean --cmd 'set rtp^=$PWD/editors/nvim' --cmd \"let g:warden_path = '$warden'\" \
   --cmd 'set noswapfile shortmess+=I completeopt=menuone' -c 'syntax on' $out/demo.ward"
trap 'tmux kill-session -t "$session" 2>/dev/null || true' EXIT
keys() { tmux send-keys -t "$session" "$@"; sleep "${PAUSE:-1.5}"; }
grab() { tmux capture-pane -p -t "$session" | sed -e 's/[[:space:]]*$//' > "$out/$1.txt"; echo "wrote $out/$1.txt"; }

sleep 3
grab diagnostics

# Hover on `name` in `tool.name` (line 9).
keys ':call cursor(9, 13)' Enter
keys K
grab hover

# Completion after `tool.` on a new line in the second rule (omnifunc = the server).
keys Escape ':call cursor(13, 1)' Enter
keys 'o' ' and tool.' C-x C-o
grab completion
keys Escape Escape ':qa!' Enter
