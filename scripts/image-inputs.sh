#!/usr/bin/env bash
# What an offline image build needs, where no registry serves base images (these machines):
#   OUT/base.tar  a Debian bookworm root file system by debootstrap, with Python 3.11 and
#                 OpenCV's system libraries (`docker import OUT/base.tar avatar-base:bookworm`)
#   OUT/wheels/   the pinned dependencies of pyproject.toml (and setuptools) as wheels
# Both are kept and remade only when this script or pyproject.toml is newer. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.cache/image}
mkdir -p "$out"

if [ ! -s "$out/base.tar" ] || [ "$0" -nt "$out/base.tar" ]; then
  echo "image inputs: debootstrap of Debian bookworm (about a minute)"
  rootfs=$(mktemp -d)
  debootstrap --variant=minbase --include=python3,python3-venv,libgl1,libglib2.0-0,ca-certificates \
    bookworm "$rootfs" http://deb.debian.org/debian >"$out/debootstrap.log" 2>&1
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -cf "$out/base.tar.part" . && mv "$out/base.tar.part" "$out/base.tar"
  rm -rf "$rootfs"
fi

if [ ! -f "$out/wheels/.complete" ] || [ pyproject.toml -nt "$out/wheels/.complete" ]; then
  echo "image inputs: the dependencies' wheels"
  rm -rf "$out/wheels"
  .venv/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
    >"$out/requirements.txt"
  .venv/bin/python -m pip download -qq -d "$out/wheels" --only-binary=:all: -r "$out/requirements.txt" "setuptools>=77"
  touch "$out/wheels/.complete"
fi
