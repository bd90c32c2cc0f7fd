#!/usr/bin/env bash
# Builds the runtime and runs its demo on the reference archive: lists it,
# lays out a split install tree, and loads a code object for a GPU target
# through the loader. Pass --target TARGET to choose another GPU.
set -euo pipefail
cd "$(dirname "$0")"
cargo run --quiet --release -p kpack-runtime --example demo -- "$@"
