#!/usr/bin/env bash
# Every ```lua block of README.md and docs/*.md runs as written, alone or after the file its
# marker names, on the ranks it declares (tests/docs/doc_blocks.lua; docs/testing.md).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
"$1" run "$root/tests/docs/doc_blocks.lua" "$root"
