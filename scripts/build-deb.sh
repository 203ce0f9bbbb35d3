#!/usr/bin/env bash
# Builds the Debian package: target/debian/pimigrate_<version>-<revision>_<arch>.deb
# (the version and the Debian revision from Cargo.toml; what the package
# holds besides the program comes from packaging/deb/ and the tool crate's
# `cargo xtask assets`; docs/packaging.md).
#
#   scripts/build-deb.sh                # this machine's architecture
#   scripts/build-deb.sh --arch arm64   # 64-bit Raspberry Pi OS (Pi 3, 4, 5, Zero 2 W)
#   scripts/build-deb.sh --arch armhf   # 32-bit Raspberry Pi OS on ARMv7 (Pi 2 and later)
#
# The machine's own architecture builds with its cargo. Another one is
# cross-built as root in a Debian trixie chroot kept under
# /var/cache/pimigrate-build (made on the first run; Rust 1.85 from Debian,
# linked by zig against glibc 2.31, so the binary starts on Raspberry Pi OS
# bullseye and later; docs/packaging.md). Build outputs stay cached there,
# so a second run only packs. Extra arguments go to `cargo deb`. The last
# line on stdout is the package's path.
#
#   scripts/build-deb.sh --arch arm64 --binary-only
#
# compiles a cross build's binary into that cache and stops, without
# packing: scripts/test.sh does it beside the testbed's speed scenarios,
# at the lowest priority, so that check-deb.sh later finds it built.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

host_arch=$(dpkg --print-architecture 2>/dev/null || echo unknown)
# The package's version: Cargo.toml's, then its Debian revision.
deb_version=$(sed -nE 's/^version = "([^"]+)"/\1/p' Cargo.toml | head -1)-$(sed -nE 's/^revision = "([^"]+)"/\1/p' Cargo.toml | head -1)
arch=$host_arch
args=() binary_only=no
while [[ $# -gt 0 ]]; do
    case $1 in
        --arch) arch=${2:?--arch needs arm64, armhf or $host_arch}; shift 2 ;;
        --arch=*) arch=${1#--arch=}; shift ;;
        --binary-only) binary_only=yes; shift ;;
        *) args+=("$1"); shift ;;
    esac
done

# add_md5sums TREE: DEBIAN/md5sums for an unpacked package (cargo-deb
# writes none; debsums and dpkg --verify read it).
add_md5sums() {
    (cd "$1" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0r md5sum) >"$1/DEBIAN/md5sums"
    chmod 644 "$1/DEBIAN/md5sums"
}

if [[ $arch == "$host_arch" ]]; then
    [[ $binary_only == no ]] || die "--binary-only is for the cross builds (--arch arm64 or armhf)"
    ensure_build_tools
    # The man pages, completions, units and documentation, and the
    # copyright file naming the crates linked for this target (the tool
    # crate, xtask/, built for this machine; it says what failed).
    cargo xtask assets target/assets >/dev/null || die "could not write target/assets (see above)"
    if ! cargo deb --version >/dev/null 2>&1; then
        say "installing cargo-deb"
        cargo install cargo-deb --locked
    fi
    # cargo deb builds the release binary itself and strips it.
    target_dir=${CARGO_TARGET_DIR:-$PWD/target}
    cargo deb --locked --output "$target_dir/debian/" "${args[@]}" >&2
    deb=$target_dir/debian/pimigrate_${deb_version}_${arch}.deb
    tree=$(mktemp -d)
    dpkg-deb -R "$deb" "$tree" && add_md5sums "$tree" &&
        dpkg-deb --root-owner-group -Zxz -b "$tree" "$deb" >/dev/null || die "could not add md5sums to $deb"
    rm -rf "$tree"
    echo "$deb"
    exit 0
fi

triple=$(triple_of "$arch") || die "--arch $arch: this script builds arm64, armhf or this machine's $host_arch"
[[ $host_arch == amd64 ]] || die "cross builds run on an x86_64 Debian or Ubuntu machine; on this $host_arch machine build its own architecture"
ensure_build_chroot
started=$SECONDS
say "building the $arch package for $triple with glibc $pi_glibc (in $build_chroot)"
if [[ $binary_only == yes ]]; then
    in_build_chroot "$PWD" cargo zigbuild --locked --release -p pimigrate --target "$triple.$pi_glibc" >&2
    say "built the $arch binary in $((SECONDS - started)) s (--binary-only: not packed)"
    exit 0
fi
out=$PWD/target/debian
mkdir -p "$out"
# The man pages, completions, units and documentation are text, the same
# for every architecture and compiler (the copyright file names the crates
# linked for the target): the tool crate (xtask/, built for the host only;
# the Pi's build below is `-p pimigrate`) writes them with this machine's
# cargo when it has one (its build of the library is usually there
# already), else with the chroot's, which first compiles the library for
# the host once more.
gen_assets=yes
if command -v cargo >/dev/null 2>&1; then
    cargo xtask assets target/assets --target "$triple" >/dev/null || die "could not write target/assets (see above)"
    gen_assets=no
fi
in_build_chroot "$PWD" bash -euc '
    triple=$1 glibc=$2 out=$3 gen_assets=$4
    shift 4
    if [ "$gen_assets" = yes ]; then
        cargo xtask assets target/assets --target "$triple" >/dev/null
    fi
    cargo zigbuild --locked --release -p pimigrate --target "$triple.$glibc"
    cargo deb --locked --no-build --target "$triple" --output "$out/" "$@"
' _ "$triple" "$pi_glibc" "$out" "$gen_assets" "${args[@]}" >&2
deb=$out/pimigrate_${deb_version}_${arch}.deb
[[ -f $deb ]] || die "cargo deb did not write $deb"

# dpkg-shlibdeps ($auto) reads the chroot's glibc 2.41 symbols files,
# which ask for libc6 >= 2.34 of any binary that links libpthread.so.0 or
# libdl.so.2, as one linked against glibc 2.31 does. The binary's own
# symbol versions are the truth: depend on the highest it needs.
# It also gets its md5sums.
in_build_chroot "$PWD" bash -euc '
    deb=$1 tree=$(mktemp -d)
    dpkg-deb -R "$deb" "$tree"
    needs=$(objdump -T "$tree/usr/bin/pimigrate" | grep -Eo "GLIBC_[0-9]+(\.[0-9]+)+" | sed s/GLIBC_// | sort -uV | tail -1)
    [ -n "$needs" ] || { echo "error: $deb: no GLIBC_ symbol versions in its binary" >&2; exit 1; }
    sed -i -E "s/libc6 \(>= [0-9.]+\)/libc6 (>= $needs)/" "$tree/DEBIAN/control"
    (cd "$tree" && find . -type f ! -path "./DEBIAN/*" -printf "%P\0" | LC_ALL=C sort -z | xargs -0r md5sum) >"$tree/DEBIAN/md5sums"
    chmod 644 "$tree/DEBIAN/md5sums"
    dpkg-deb --root-owner-group -Zxz -b "$tree" "$deb" >/dev/null
    rm -rf "$tree"
' _ "$deb" >&2 || die "could not set the C library dependency and md5sums of $deb"
say "built $(basename "$deb") in $((SECONDS - started)) s"
echo "$deb"
