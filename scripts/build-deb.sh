#!/usr/bin/env bash
# Builds the Debian package: target/debian/pimigrate_<version>-1_<arch>.deb
#
#   scripts/build-deb.sh                                   # this machine's architecture
#   scripts/build-deb.sh --target aarch64-unknown-linux-gnu      # arm64 (64-bit Raspberry Pi OS)
#   scripts/build-deb.sh --target armv7-unknown-linux-gnueabihf  # armhf (32-bit Raspberry Pi OS)
#
# Extra arguments go to `cargo deb`. Cross builds need the target and a
# linker first (docs/packaging.md).
set -euo pipefail
cd "$(dirname "$0")/.."

# The man pages and completions come from the clap definition; they do not
# depend on the target architecture, so the host builds them.
cargo run --quiet --example gen-assets -- target/assets >/dev/null

if ! cargo deb --version >/dev/null 2>&1; then
    echo "==> installing cargo-deb"
    cargo install cargo-deb --locked
fi

# cargo deb builds the release binary itself (for --target too) and strips it.
cargo deb --locked "$@"
