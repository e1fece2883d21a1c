#!/bin/sh
# Regenerates requirements.lock, the hash-pinned dependencies the container image is built from
# (docs/kubernetes.md, "The image"). Needs uv (`pip install uv`) and PyPI. Run from anywhere; commit the result.
#
# Inputs: [project].dependencies and [build-system].requires of pyproject.toml (setuptools builds
# the package in the image and is removed after), for the Python minor version of the Dockerfile's
# base image, every platform (all wheel hashes, so amd64 and arm64 builds use the same lock).
set -eu
cd "$(dirname "$0")/.."
python_version=$(sed -n 's/^FROM python:\([0-9][0-9]*\.[0-9][0-9]*\)\..*/\1/p' Dockerfile | head -n 1)
[ -n "$python_version" ] || { echo "update-lock: no 'FROM python:X.Y.Z' line in Dockerfile" >&2; exit 1; }
python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))' |
  uv pip compile pyproject.toml - --generate-hashes --universal --python-version "$python_version" \
    --custom-compile-command "deploy/update-lock.sh  # for Python $python_version" --quiet --output-file requirements.lock
