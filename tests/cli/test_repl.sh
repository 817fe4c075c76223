#!/usr/bin/env bash
# The REPL through a pseudo-terminal (tab completion, multi-line input, errors, history), and piped.
set -euo pipefail
bin="$1"
/usr/bin/python3 "$(dirname "$0")/repl_pty.py" "$bin"
out=$(printf 'x = 20 +\n 22\nx\n' | "$bin" repl)
echo "$out" | grep -q "42"
