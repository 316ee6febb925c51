#!/usr/bin/env bash
# Installs everything the project needs into .venv/ (and Debian packages, when a
# later feature lists them in scripts/debian-packages.txt). Safe to rerun: it does
# nothing when .venv is already up to date with pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -s scripts/debian-packages.txt ]; then
  missing=$(grep -v '^#' scripts/debian-packages.txt | while read -r pkg; do
    [ -n "$pkg" ] && ! dpkg -s "$pkg" >/dev/null 2>&1 && echo "$pkg"; done || true)
  if [ -n "$missing" ]; then
    echo "setup: installing Debian packages: $missing"
    sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq $missing
  fi
fi

stamp=.venv/.installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]'
  touch "$stamp"
  echo "setup: .venv is ready"
fi

# `setup.sh test` (the test command): the agent-side environment of the pipecat test, and
# (as root, where dockerd is installed) the offline inputs of the container image's test
if [ "${1:-}" = test ]; then
  if [ "$(id -u)" -eq 0 ] && command -v dockerd >/dev/null; then
    scripts/image-inputs.sh .cache/image
  fi
  stamp=.venv-pipecat/.installed
  if [ ! -f "$stamp" ] || [ scripts/pipecat-requirements.txt -nt "$stamp" ]; then
    python3 -m venv .venv-pipecat
    .venv-pipecat/bin/python -m pip install -q --upgrade pip
    .venv-pipecat/bin/python -m pip install -q -r scripts/pipecat-requirements.txt
    touch "$stamp"
    echo "setup: .venv-pipecat is ready"
  fi
fi
