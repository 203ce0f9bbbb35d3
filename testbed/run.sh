#!/bin/bash
# The testbed's one entry point.
#
#   testbed/run.sh                 every scenario
#   testbed/run.sh sd-boot ...     the named ones (`testbed/run.sh --list`)
#   testbed/run.sh --write-docs    the scenario table of docs/testbed/scenarios.md
#   testbed/run.sh --packages      only install the host packages it needs
#
# Installs the host packages it needs, builds or reuses the cached image,
# runs the scenarios and exits non-zero on any failure. Nothing is ever
# skipped: a missing tool or a failed setup is a failure, loudly, in CI
# (CI=true) as anywhere else. The last line is `testbed: N passed, N failed`.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."

say() { echo "testbed: $*" >&2; }
setup_failed() {
    say "SETUP FAILED: $*"
    [[ ${CI:-} == true ]] && say "(CI=true: the testbed must run here; fix the machine setup, do not skip)"
    echo "testbed: 0 passed, 1 failed"
    exit 1
}

# tool -> Debian package
declare -A need=(
    [qemu-system-x86_64]=qemu-system-x86
    # The ARM lane: QEMU's raspi3b, and an arm64 image built under qemu-user.
    [qemu-system-aarch64]=qemu-system-arm
    [qemu-aarch64-static]=qemu-user-static
    [debootstrap]=debootstrap
    [mcopy]=mtools
    [mkfs.vfat]=dosfstools
    [sfdisk]=fdisk
    [mkfs.ext4]=e2fsprogs
    [debugfs]=e2fsprogs
    [flock]=util-linux
    # The firmware stand-in unpacks the x86 guest's xz-compressed kernel
    # once, as a Pi's firmware unpacks a compressed one (src/host/kernel.rs).
    [xz]=xz-utils
    # The firmware stand-in marks a trial boot's device tree (fdtput); its
    # tests compile device trees (dtc) and read them back (fdtget).
    [fdtput]=device-tree-compiler
    [fdtget]=device-tree-compiler
    [dtc]=device-tree-compiler
    # The fleet scenario drives the guest with Ansible over SSH.
    [ansible-playbook]=ansible-core
    [ssh]=openssh-client
    [ssh-keygen]=openssh-client
)

missing_packages() {
    local tool
    for tool in "${!need[@]}"; do
        command -v "$tool" >/dev/null 2>&1 || echo "${need[$tool]}"
    done | sort -u
}

apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
}

install_packages() {
    local pkgs
    mapfile -t pkgs < <(missing_packages)
    [[ ${#pkgs[@]} == 0 ]] && return 0
    say "installing ${pkgs[*]}"
    [[ $(id -u) == 0 ]] || setup_failed "missing ${pkgs[*]} and not root to install them"
    command -v apt-get >/dev/null || setup_failed "missing ${pkgs[*]} and no apt-get"
    apt_install "${pkgs[@]}" && return 0
    # The package lists may be stale or absent: refresh once and retry.
    apt-get update -q >&2 || setup_failed "apt-get update failed"
    apt_install "${pkgs[@]}" && return 0
    # A qemu-utils from bookworm-backports (as these machines have) conflicts
    # with bookworm's own qemu-system-x86: take the matching backport.
    if dpkg-query -W -f='${Version}' qemu-utils 2>/dev/null | grep -q '~bpo12'; then
        say "qemu-utils is a bookworm backport; installing from bookworm-backports"
        local src=/etc/apt/sources.list.d/bookworm-backports.sources
        if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
            printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' >"$src"
            apt-get update -q >&2 || setup_failed "apt-get update with bookworm-backports failed"
        fi
        apt_install -t bookworm-backports "${pkgs[@]}" && return 0
    fi
    setup_failed "could not install ${pkgs[*]}"
}

if [[ ${1:-} == --list ]]; then
    exec cargo run -q -p pi-testbed -- list
fi
# docs/testbed/scenarios.md's table, from each scenario's `about`.
if [[ ${1:-} == --write-docs ]]; then
    exec cargo run -q -p pi-testbed -- write-docs
fi

[[ $(id -u) == 0 ]] || setup_failed "run as root (debootstrap, chroot and disk images need it)"
install_packages
leftover=$(missing_packages)
[[ -z $leftover ]] || setup_failed "still missing after install: $leftover"
# --packages: only the host packages (scripts/test.sh installs them up
# front, so that no two of its steps run apt at once).
[[ ${1:-} == --packages ]] && exit 0

# Disk space, checked up front so that a small disk is one clear failure
# instead of sixteen "No space left on device". Each scenario's disk images
# are removed when it ends (PI_TESTBED_KEEP_WORK=1 keeps them); the largest
# scenario peaks at about 2.5 GB, two run at once (three with
# PI_TESTBED_EXTRA_JOB_AFTER), and building the image
# needs about 2 GB more in the cache until it is done.
mib() { echo "$(($1 >> 20)) MiB"; }
require_free() { # DIR BYTES WHAT
    local have
    have=$(df --output=avail -B1 "$1" | tail -1)
    ((have >= $2)) || setup_failed "$(mib "$have") free under $1, $(mib "$2") needed for $3 (du -sh $1/* shows what takes the space)"
}
check_disk_space() {
    local target=${CARGO_TARGET_DIR:-$PWD/target}
    local cache=${PI_TESTBED_CACHE:-/var/cache/pimigrate-testbed}
    # Scenarios that time nothing run PI_TESTBED_JOBS (2) at a time.
    # (One more later with PI_TESTBED_EXTRA_JOB_AFTER.)
    local jobs=${PI_TESTBED_JOBS:-2}
    [[ -z ${PI_TESTBED_EXTRA_JOB_AFTER:-} ]] || jobs=$((jobs + 1))
    local scenarios=$((jobs * (3 << 30))) build=0
    [[ -f $cache/images/$(testbed/image/build-image.sh --print-key)/READY ]] || build=$((3 << 30))
    # The ARM lane's image: its root, the ext4 made of it and the card.
    [[ -f $cache/images-arm64/$(testbed/image-arm64/build-image.sh --print-key)/READY ]] ||
        build=$((build + (3 << 30)))
    mkdir -p "$target" "$cache"
    if [[ $(stat -c %d "$target") == $(stat -c %d "$cache") ]]; then
        require_free "$target" $((scenarios + build)) "the testbed (scenario disk images, image build)"
    else
        require_free "$target" "$scenarios" "the testbed's scenario disk images"
        ((build == 0)) || require_free "$cache" "$build" "building the testbed image"
    fi
}
check_disk_space

# Not quiet: a first build takes minutes, and cargo's lines show it going.
say "building the testbed harness and pimigrate (release)"
cargo build -p pi-testbed >&2 || setup_failed "cargo build -p pi-testbed failed"
# The pimigrate scenarios place this binary in the guest (Debian 12 as the host).
cargo build --release -p pimigrate --bin pimigrate --example copy-tree >&2 ||
    setup_failed "cargo build --release -p pimigrate failed"
# ensure_qemu10: QEMU 10 (for the raspi4b machine; Debian 12 has 7.2),
# unpacked from bookworm-backports' qemu-system-arm into the testbed's
# cache, beside the host's QEMU: a private apt configuration downloads the
# one package, so the host's apt sources never gain backports (with them,
# apt would upgrade host packages). Its libraries are bookworm's own.
ensure_qemu10() {
    local cache=${PI_TESTBED_CACHE:-/var/cache/pimigrate-testbed}
    local dir=$cache/qemu10 work apt_opts
    local program=$dir/usr/bin/qemu-system-aarch64
    if [[ ! -x $program ]]; then
        say "unpacking QEMU 10 (raspi4b) from bookworm-backports into $dir"
        work=$(mktemp -d "$cache/qemu10.XXXXXX")
        mkdir -p "$work/lists/partial" "$work/archives/partial"
        echo "deb ${PI_TESTBED_MIRROR:-http://deb.debian.org/debian} bookworm-backports main" >"$work/sources.list"
        apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
            -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Sandbox::User=root)
        apt-get "${apt_opts[@]}" update -q >&2 &&
            (cd "$work" && apt-get "${apt_opts[@]}" download qemu-system-arm/bookworm-backports >&2) &&
            dpkg-deb -x "$work"/qemu-system-arm_*.deb "$work/root" ||
            { rm -rf "$work"; return 1; }
        rm -rf "$dir" && mv "$work/root" "$dir" && rm -rf "$work"
    fi
    "$program" -machine help | grep -q '^raspi4b ' || return 1
    export PI_TESTBED_QEMU10=$program
}

# The ARM lane's guest runs pimigrate built for arm64 against the oldest
# glibc it supports, as the Debian package ships it (scripts/build-deb.sh,
# whose build cache holds it; built already when scripts/test.sh's early
# builds ran).
if [[ $(cargo run -q -p pi-testbed -- needs-arm "$@") == yes ]]; then
    # The ARM image's root is made under qemu-user. A subshell: lib.sh's
    # say, die and install_packages stay apart from this script's own.
    (source scripts/lib.sh && ensure_qemu_user) ||
        setup_failed "could not register qemu-user with binfmt_misc (see above)"
    say "building pimigrate for arm64 (the ARM lane's guests run it)"
    scripts/build-deb.sh --arch arm64 --binary-only >&2 ||
        setup_failed "scripts/build-deb.sh --arch arm64 --binary-only failed"
    ensure_qemu10 || setup_failed "could not unpack QEMU 10 with raspi4b from bookworm-backports (see above)"
    export PI_TESTBED_ARM64_PIMIGRATE=${PIMIGRATE_BUILD_CACHE:-/var/cache/pimigrate-build}/target/aarch64-unknown-linux-gnu/release/pimigrate
fi
cargo run -q -p pi-testbed -- run "$@"
status=$?
# Status 2 means the harness itself could not start (no summary printed).
if [[ $status == 2 ]]; then
    echo "testbed: 0 passed, 1 failed"
fi
exit "$status"
