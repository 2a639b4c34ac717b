#!/usr/bin/env bash
# Install the test extras (Debian's chromium for the browser tests, the package with its test
# extras: xprof, playwright, pytest, grpcio-tools) and run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq chromium >/dev/null
fi
# Exact versions of every test and dev tool (tools/test-constraints.txt, refreshed by
# tools/lock_test_tools.sh): a new release of a test tool cannot change what CI runs.
python3 -m pip install -q -c tools/test-constraints.txt -e ".[test]"
mkdir -p test-output
# Lint, format, types and import contracts first (pyproject.toml): a failure names the file and line.
python3 -m ruff check .
python3 -m ruff format --check .
python3 -m mypy  # tb_roofline/ at the level pyproject.toml sets (~30 s)
# The import contracts of pyproject.toml (the flow goes one way; seconds): `lint-imports`, run
# through this python3 as the tools above are, whether or not its scripts are on PATH.
python3 -c "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"
python3 -m pytest -q "$@"
