#!/usr/bin/env bash
# The README's test command (after scripts/setup.sh): ruff and mypy, then pytest, inside a private network
# namespace whenever one can be made (root, or unprivileged user namespaces), so test
# traffic never leaves this machine. aiortc never offers 127.0.0.1 as a host candidate,
# so besides loopback the namespace holds a veth pair whose one end has TEST_ADDRESS:
# the one address aiortc and Chromium find to offer. Where no namespace can be made the
# suites run on this machine's own network, as before.
set -euo pipefail
cd "$(dirname "$0")/.."
TEST_ADDRESS=198.18.0.1/24

if [ "${AVATAR_TEST_NETNS:-}" != inside ]; then  # once, before the suites
  .venv/bin/ruff check .
  .venv/bin/mypy
fi

if [ "${AVATAR_TEST_NETNS:-}" = inside ]; then
  ip link set lo up
  ip link add avatar-test0 type veth peer name avatar-test1
  ip addr add "$TEST_ADDRESS" dev avatar-test0
  ip link set avatar-test0 up
  ip link set avatar-test1 up
  exec .venv/bin/python -m pytest "$@"
fi

if command -v unshare >/dev/null && command -v ip >/dev/null; then
  for ns in "unshare --net" "unshare --user --map-root-user --net"; do
    if $ns true 2>/dev/null; then
      exec $ns env AVATAR_TEST_NETNS=inside "$0" "$@"
    fi
  done
fi
echo "test: no private network namespace can be made here; the suites use this machine's network" >&2
exec .venv/bin/python -m pytest "$@"
