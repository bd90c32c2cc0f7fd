#!/usr/bin/env bash
# Every test, on a fresh Debian machine: installs what the tests need, then
# runs `cargo test --workspace` with this script's arguments passed on
# (`./test.sh -p kpack-packer` runs one package's).
#
# - Debian packages (crates/kpack-test-support/tools.txt): installed with apt-get when
#   running as root; otherwise the one apt-get line to run is printed and the
#   script stops before building anything.
# - Rust's x86_64-pc-windows-gnu target, added with rustup when rustup
#   manages the toolchain.
# - Python tools (crates/kpack-test-support/requirements.txt): installed into the
#   project's own virtual environment, target/test-venv, never into the
#   system's Python. Reinstalled only when requirements.txt changes.
# - Real wheels from PyPI (crates/kpack-test-support/downloads.txt): fetched
#   once with pip, checked against their sha256, kept in the download cache.
#
# Run again, it installs nothing and cargo starts within seconds.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v cargo >/dev/null 2>&1; then
    echo "test.sh: cargo not found: install a Rust toolchain (https://rustup.rs) first" >&2
    exit 1
fi

# --- Debian packages -------------------------------------------------------
missing=()
while read -r command package; do
    case "$command" in '' | '#'*) continue ;; esac
    case "$command" in
    /*) [ -e "$command" ] || missing+=("$package") ;;
    *) command -v "$command" >/dev/null 2>&1 || missing+=("$package") ;;
    esac
done <crates/kpack-test-support/tools.txt
# The interpreter must be able to make a virtual environment with pip in it
# (Debian splits that into python3-venv).
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    missing+=(python3-venv)
fi
if [ ${#missing[@]} -gt 0 ]; then
    readarray -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    if [ "$(id -u)" -eq 0 ]; then
        echo "test.sh: installing Debian packages: ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "test.sh: the tests need Debian packages that are not installed; run" >&2
        echo >&2
        echo "    sudo apt-get install -y ${missing[*]}" >&2
        echo >&2
        echo "then ./test.sh again." >&2
        exit 1
    fi
fi

# --- Rust targets ----------------------------------------------------------
# The Windows tests build the runtime as a DLL (kpack_test_support::windows).
windows_target=x86_64-pc-windows-gnu
if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed | grep -qx "$windows_target"; then
    echo "test.sh: adding the Rust target $windows_target"
    rustup target add "$windows_target"
fi

# --- Python tools ----------------------------------------------------------
target_dir=${CARGO_TARGET_DIR:-target}
venv="$target_dir/test-venv"
stamp="$venv/.requirements"
if ! cmp -s crates/kpack-test-support/requirements.txt "$stamp" 2>/dev/null; then
    echo "test.sh: installing Python tools into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r crates/kpack-test-support/requirements.txt
    cp crates/kpack-test-support/requirements.txt "$stamp"
fi
KPACK_TEST_VENV=$(cd "$venv" && pwd)
export KPACK_TEST_VENV

# --- Real packages from PyPI -------------------------------------------------
# crates/kpack-test-support/downloads.txt: fetched once by name and version,
# checked against their sha256, kept in the download cache; tests never
# download.
downloads=${KPACK_TEST_DOWNLOADS:-${XDG_CACHE_HOME:-$HOME/.cache}/rocm-kpack-get/test-downloads}
mkdir -p "$downloads"
while read -r file sha256 requirement flags; do
    case "$file" in '' | '#'*) continue ;; esac
    if [ -f "$downloads/$file" ]; then continue; fi
    echo "test.sh: downloading $file"
    fetched=$(mktemp -d "$downloads/.fetch-XXXXXX")
    # shellcheck disable=SC2086 # the flags are words
    "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
        --only-binary=:all: $flags -d "$fetched" "$requirement" </dev/null
    if ! echo "$sha256  $fetched/$file" | sha256sum --check --quiet; then
        echo "test.sh: $file does not have the sha256 downloads.txt gives it" >&2
        rm -rf "$fetched"
        exit 1
    fi
    mv "$fetched/$file" "$downloads/$file"
    rm -rf "$fetched"
done <crates/kpack-test-support/downloads.txt
KPACK_TEST_DOWNLOADS=$(cd "$downloads" && pwd)
export KPACK_TEST_DOWNLOADS

# The whole workspace, unless the arguments pick packages.
scope=(--workspace)
for arg in "$@"; do
    case "$arg" in -p* | --package | --package=*) scope=() ;; esac
done
exec cargo test "${scope[@]}" "$@"
