# Shared by the scripts in this directory: sourced, not run.

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# ensure_packages TOOL=PACKAGE...: installs the Debian packages whose tools
# are missing.
ensure_packages() {
    local pair tool pkg missing=()
    for pair in "$@"; do
        tool=${pair%%=*} pkg=${pair#*=}
        command -v "$tool" >/dev/null 2>&1 || [[ -x /usr/sbin/$tool || -x /sbin/$tool ]] || missing+=("$pkg")
    done
    [[ ${#missing[@]} == 0 ]] && return 0
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    install_packages "${missing[@]}"
}

# install_packages PACKAGE...: apt-get install, refreshing the package
# lists once if the first try fails (a fresh machine has none).
install_packages() {
    say "installing $*"
    [[ $(id -u) == 0 ]] || die "missing $*: run this script with sudo"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "$@" >&2 \
        || { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends "$@" >&2; } \
        || die "could not install $*"
}

# The oldest Rust that builds pimigrate: Cargo.toml's rust-version.
rust_version_needed() {
    sed -nE 's/^rust-version = "([0-9.]+)"/\1/p' "$(dirname "${BASH_SOURCE[0]}")/../Cargo.toml"
}

# cargo_recent_enough: is the cargo on PATH at least rust-version? (Debian
# 12's own cargo, 1.65, is not.)
cargo_recent_enough() {
    local have need
    have=$(cargo --version 2>/dev/null | awk '{print $2}') || return 1
    need=$(rust_version_needed)
    [[ -n $have && $(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1) == "$need" ]]
}

# ensure_cargo: puts a recent enough Rust toolchain on PATH: the invoking
# user's rustup one (sudo drops ~/.cargo/bin from PATH), else a new one
# installed with rustup.
ensure_cargo() {
    cargo_recent_enough && return 0
    local home
    for home in "${SUDO_USER:+$(getent passwd "$SUDO_USER" | cut -d: -f6)}" "$HOME"; do
        if [[ -n $home && -x $home/.cargo/bin/cargo ]]; then
            export PATH="$home/.cargo/bin:$PATH"
            cargo_recent_enough && return 0
        fi
    done
    ensure_packages curl=curl
    if command -v rustup >/dev/null 2>&1; then
        say "updating Rust with rustup (pimigrate needs $(rust_version_needed) or newer)"
        rustup toolchain install stable --profile minimal -c clippy -c rustfmt >&2 &&
            rustup default stable >&2 || die "could not update Rust; see https://rustup.rs"
    else
        say "installing Rust with rustup (pimigrate needs $(rust_version_needed) or newer)"
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c clippy -c rustfmt >&2 \
            || die "could not install Rust; see https://rustup.rs"
        export PATH="$HOME/.cargo/bin:$PATH"
    fi
    cargo_recent_enough || die "cargo $(cargo --version 2>/dev/null) is older than $(rust_version_needed), which pimigrate needs"
}

# A C toolchain for linking (libc6-dev: with --no-install-recommends, gcc
# alone does not bring the C library's headers and crt files) and
# pkg-config for the -sys crates.
ensure_build_tools() {
    ensure_packages cc=gcc pkg-config=pkg-config
    ensure_c_library
    ensure_cargo
}

ensure_c_library() {
    dpkg-query -W -f='${Status}' libc6-dev 2>/dev/null | grep -q 'install ok installed' && return 0
    install_packages libc6-dev
}

# --- The build chroot: the Pi packages and the ARM tests --------------------
#
# rustup cannot always fetch other targets' standard libraries, and the
# host's C library is too new for the oldest Raspberry Pi OS, so the arm64
# and armhf builds run in a Debian trixie chroot (its rustc is 1.85, our
# rust-version, with libstd-rust-dev for both targets and the cross gccs)
# and link with zig (cargo-zigbuild) against glibc 2.31, Raspberry Pi OS
# bullseye's. Everything is cached outside the checkout, so a fresh clone
# on the same machine reuses the chroot, the crates and the build.
build_cache=${PIMIGRATE_BUILD_CACHE:-/var/cache/pimigrate-build}
build_chroot=$build_cache/trixie
# What the chroot holds; a change here completes an older chroot.
chroot_packages=(rustc cargo libstd-rust-dev:arm64 libstd-rust-dev:armhf gcc libc6-dev
    gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf libc6-dev:arm64 libc6-dev:armhf
    binutils-aarch64-linux-gnu binutils-arm-linux-gnueabihf dpkg-dev git ca-certificates
    python3-venv)
# The linker for glibc 2.31 and the glibc it targets, from PyPI (pinned, so
# a build is the same next year).
zig_packages=(cargo-zigbuild==0.24.1 ziglang==0.17.1)
cargo_deb_version=2.12.1
pi_glibc=2.31

# prune_build_outputs DIR: empties a cargo target folder kept between runs
# (CI's, scripts/test.sh) once it outgrows PIMIGRATE_BUILD_CACHE_GB (20 by
# default): the outputs of dependency versions no longer built pile up.
prune_build_outputs() {
    local dir=$1 limit=${PIMIGRATE_BUILD_CACHE_GB:-20} kib
    [[ -d $dir ]] || return 0
    kib=$(du -sk "$dir" | cut -f1)
    if ((kib > limit * 1024 * 1024)); then
        say "emptying $dir: $((kib >> 20)) GB of build outputs, over the ${limit} GB kept"
        rm -rf "$dir"
    fi
}

# deb_arch_of TRIPLE / triple_of DEB_ARCH
triple_of() {
    case $1 in
        arm64) echo aarch64-unknown-linux-gnu ;;
        armhf) echo armv7-unknown-linux-gnueabihf ;;
        amd64) echo x86_64-unknown-linux-gnu ;;
        *) return 1 ;;
    esac
}

# ensure_build_chroot: creates or completes the chroot (debootstrap, then
# apt in the chroot; the host's own apt sources are never touched).
ensure_build_chroot() {
    local stamp=$build_chroot/.pimigrate-packages want
    want=$(printf '%s\n' "${chroot_packages[@]}" "${zig_packages[@]}" "cargo-deb $cargo_deb_version")
    [[ -f $stamp && $(cat "$stamp") == "$want" ]] && return 0
    [[ $(id -u) == 0 ]] || die "the build chroot needs root: run this script with sudo"
    ensure_packages debootstrap=debootstrap unshare=util-linux
    mkdir -p "$build_cache"
    if [[ ! -x $build_chroot/usr/bin/apt-get ]]; then
        say "creating the Debian trixie build chroot in $build_chroot (once)"
        rm -rf "$build_chroot.tmp"
        debootstrap --variant=minbase trixie "$build_chroot.tmp" >&2 \
            || die "debootstrap trixie failed (see above); it needs the Debian archive"
        mv "$build_chroot.tmp" "$build_chroot"
    fi
    say "installing the cross toolchains in the build chroot"
    # The host's certificate authorities, so HTTPS works from the chroot
    # wherever it works on the host. A new minbase chroot has no
    # /etc/ssl/certs until ca-certificates is installed: without the mkdir
    # the cp failed and every build on a new machine stopped here.
    mkdir -p "$build_chroot/etc/ssl/certs"
    cp /etc/ssl/certs/ca-certificates.crt "$build_chroot/etc/ssl/certs/ca-certificates.crt"
    chroot "$build_chroot" dpkg --add-architecture arm64
    chroot "$build_chroot" dpkg --add-architecture armhf
    chroot "$build_chroot" env DEBIAN_FRONTEND=noninteractive sh -c \
        'apt-get update -q && apt-get install -y -q --no-install-recommends "$@"' _ "${chroot_packages[@]}" >&2 \
        || die "could not install the cross toolchains in $build_chroot"
    cp /etc/ssl/certs/ca-certificates.crt "$build_chroot/etc/ssl/certs/ca-certificates.crt"
    chroot "$build_chroot" env -i PATH=/usr/bin:/bin PIP_CERT=/etc/ssl/certs/ca-certificates.crt sh -c \
        '[ -x /opt/zig/bin/pip ] || python3 -m venv /opt/zig; /opt/zig/bin/pip install -q --disable-pip-version-check "$@"' _ "${zig_packages[@]}" >&2 \
        || die "could not install ${zig_packages[*]} from PyPI in $build_chroot"
    in_build_chroot / cargo install -q --locked --root "$build_cache/cargo-tools" cargo-deb --version "$cargo_deb_version" >&2 \
        || die "could not build cargo-deb $cargo_deb_version in $build_chroot"
    printf '%s\n' "$want" >"$stamp"
}

# in_build_chroot DIR COMMAND...: runs COMMAND in the chroot, in DIR. The
# checkout, its git directory (a worktree's lies elsewhere) and the caches
# are mounted at their own paths, so paths compiled into test binaries
# (env!("CARGO_MANIFEST_DIR"), CARGO_BIN_EXE_*) hold on the host too. The
# mounts live in a mount namespace of their own and vanish with it.
in_build_chroot() {
    local dir=$1 src git_dir=
    shift
    src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    git_dir=$(git -C "$src" rev-parse --path-format=absolute --git-common-dir 2>/dev/null) || git_dir=
    [[ $git_dir == "$src"/* ]] && git_dir=
    mkdir -p "$build_cache"/{target,cargo-home,cargo-tools} "$build_chroot/etc/ssl/certs"
    cp /etc/ssl/certs/ca-certificates.crt "$build_chroot/etc/ssl/certs/ca-certificates.crt"
    unshare --mount --propagation private -- bash -euc '
        root=$1 src=$2 cache=$3 git_dir=$4 dir=$5
        shift 5
        for path in "$src" "$cache/target" "$cache/cargo-home" "$cache/cargo-tools"; do
            mkdir -p "$root$path"
            mount --bind "$path" "$root$path"
        done
        # Read-only: the build only asks git which commit it is.
        if [[ -n $git_dir ]]; then
            mkdir -p "$root$git_dir"
            mount --bind -o ro "$git_dir" "$root$git_dir"
        fi
        mount -t proc proc "$root/proc"
        exec chroot "$root" env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" CI="${CI:-}" \
            PATH="/opt/zig/bin:$cache/cargo-tools/bin:/usr/bin:/bin" \
            CARGO_HOME="$cache/cargo-home" CARGO_TARGET_DIR="$cache/target" \
            ${CARGO_INCREMENTAL:+CARGO_INCREMENTAL=$CARGO_INCREMENTAL} \
            ${CARGO_PROFILE_DEV_DEBUG:+CARGO_PROFILE_DEV_DEBUG=$CARGO_PROFILE_DEV_DEBUG} \
            bash -c "cd \"\$0\" && exec \"\$@\"" "$dir" "$@"
    ' _ "$build_chroot" "$src" "$build_cache" "$git_dir" "$dir" "$@"
}

# highest_glibc FILE: the highest GLIBC_x.y symbol version FILE needs
# (empty for a static binary).
highest_glibc() {
    objdump -T "$1" | grep -Eo 'GLIBC_[0-9]+(\.[0-9]+)+' | sed 's/GLIBC_//' | sort -uV | tail -1
}

# qemu-user for the ARM binaries: QEMU 10, unpacked from
# bookworm-backports' qemu-user into the build cache, as testbed/run.sh
# unpacks its QEMU 10 (a private apt configuration downloads the one
# package: the host's apt sources never gain backports). Bookworm's own
# qemu-user (7.2) now and then deadlocks a process that a multithreaded
# emulated program forks: the child waits for ever on a lock another
# thread held at the fork, before its exec (the test binaries fork
# pimigrate, which forks mkfs); QEMU 10 takes its locks around a fork.
qemu_user_dir=$build_cache/qemu-user10
qemu_user_package=qemu-user/bookworm-backports

# ensure_qemu_user: that qemu-user registered with binfmt_misc for
# aarch64 and arm, so arm64 and armhf binaries and every process they
# start run on this machine as if they were its own. The F flag opens the
# interpreter once, at registration, so it works inside chroots too. The
# entries are pimigrate's own (pimigrate-qemu-aarch64, -arm), registered
# after any the distribution made (binfmt_misc tries the newest first), so
# Debian's qemu-user-static, if installed, stays as it is.
ensure_qemu_user() {
    [[ $(id -u) == 0 ]] || die "registering qemu-user with binfmt_misc needs root: run this script with sudo"
    local work apt_opts cpu line name type offset magic mask interp flags entry want
    if [[ ! -x $qemu_user_dir/usr/bin/qemu-aarch64 ]]; then
        say "unpacking QEMU 10's qemu-user from bookworm-backports into $qemu_user_dir (once)"
        mkdir -p "$build_cache"
        work=$(mktemp -d "$build_cache/qemu-user10.XXXXXX")
        mkdir -p "$work/lists/partial" "$work/archives/partial"
        echo "deb ${PIMIGRATE_DEBIAN_MIRROR:-http://deb.debian.org/debian} bookworm-backports main" >"$work/sources.list"
        apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
            -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Sandbox::User=root)
        { apt-get "${apt_opts[@]}" update -q >&2 &&
            (cd "$work" && apt-get "${apt_opts[@]}" download "$qemu_user_package" >&2) &&
            dpkg-deb -x "$work"/qemu-user_*.deb "$work/root"; } ||
            { rm -rf "$work"; die "could not unpack $qemu_user_package (see above)"; }
        rm -rf "$qemu_user_dir" && mv "$work/root" "$qemu_user_dir" && rm -rf "$work"
    fi
    if ! mountpoint -q /proc/sys/fs/binfmt_misc; then
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc \
            || die "cannot mount binfmt_misc: qemu-user needs it to run ARM binaries"
    fi
    for cpu in aarch64 arm; do
        line=$(grep -v '^#' "$qemu_user_dir/usr/share/qemu/binfmt.d/qemu-$cpu.conf") ||
            die "$qemu_user_dir has no binfmt.d/qemu-$cpu.conf"
        IFS=: read -r _ name type offset magic mask interp flags <<<"$line"
        interp=$qemu_user_dir$interp
        entry=/proc/sys/fs/binfmt_misc/pimigrate-qemu-$cpu
        if [[ -e $entry ]] && ! grep -qx "interpreter $interp" "$entry"; then
            echo -1 >"$entry" # made from another unpacked copy: again
        fi
        if [[ ! -e $entry ]]; then
            want=":pimigrate-qemu-$cpu:$type:$offset:$magic:$mask:$interp:$flags"
            printf '%s' "$want" >/proc/sys/fs/binfmt_misc/register ||
                die "could not register $interp with binfmt_misc for $cpu"
        fi
        [[ $(head -1 "$entry") == enabled ]] || echo 1 >"$entry"
        # Debian's name for the entry, when nothing registered it (a new
        # machine where qemu-user-static's binfmt.d file was never loaded):
        # the same QEMU 10 under that name, which the ARM lane's image
        # recipe looks for (testbed/image-arm64/build-image.sh).
        if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-$cpu ]]; then
            printf '%s' ":qemu-$cpu:$type:$offset:$magic:$mask:$interp:$flags" >/proc/sys/fs/binfmt_misc/register ||
                die "could not register $interp with binfmt_misc as qemu-$cpu"
        fi
    done
}

# qemu_user_version: the version of the qemu-user that runs aarch64
# binaries here (QEMU_VERSION makes it print that and stop), through
# binfmt_misc, as the tests' processes get it.
qemu_user_version() {
    local loader
    loader=$(find "$build_chroot/usr/lib/aarch64-linux-gnu" "$build_chroot/usr/aarch64-linux-gnu/lib" \
        -maxdepth 1 -name 'ld-linux-aarch64.so.1' 2>/dev/null | head -1)
    [[ -n $loader ]] || return 1
    QEMU_VERSION=1 "$loader" 2>&1 | sed -nE 's/^qemu-aarch64 version ([^ ]+).*/\1/p' | head -1
}

# ensure_pi_root ARCH [PACKAGE,...]: a Debian bookworm root for ARCH
# (Raspberry Pi OS bookworm's base) with what the package depends on (and
# the packages named), made once with debootstrap (under qemu-user for a
# foreign ARCH); prints its path.
ensure_pi_root() {
    local arch=$1 extra=${2:+,$2} root=$build_cache/bookworm-$1${2:+-${2//,/-}}
    mkdir -p "$build_cache"
    # One maker at a time: two runs that both found no root (two checkouts'
    # check-deb.sh) each emptied it under the other's debootstrap.
    (
        flock 9
        if [[ ! -f $root/.pimigrate-ready ]]; then
            ensure_packages debootstrap=debootstrap
            say "creating a Debian bookworm $arch root in $root (once)"
            rm -rf "$root"
            debootstrap --variant=minbase --arch="$arch" --include="e2fsprogs,dosfstools$extra" bookworm "$root" >&2 \
                || die "debootstrap --arch=$arch bookworm failed (see above)"
            touch "$root/.pimigrate-ready"
        fi
    ) 9>"$root.lock" || return 1
    echo "$root"
}

# ensure_lintian: lintian in the build chroot, trixie's (a Debian
# maintainer lints with a current one). Installed apart from the chroot's
# package list, so adding it does not redo the chroot's set-up.
ensure_lintian() {
    ensure_build_chroot
    [[ -x $build_chroot/usr/bin/lintian ]] && return 0
    say "installing lintian in the build chroot (once)"
    chroot "$build_chroot" env DEBIAN_FRONTEND=noninteractive sh -c \
        'apt-get install -y -q --no-install-recommends lintian || { apt-get update -q && apt-get install -y -q --no-install-recommends lintian; }' >&2 \
        || die "could not install lintian in $build_chroot"
}

# run_lintian DEB: lintian's report on DEB (its hints, one a line), run in
# the build chroot; overrides shipped in the package apply.
run_lintian() {
    local deb=$1 dir
    dir=$(mktemp -d "$build_chroot/tmp/lintian.XXXXXX")
    cp "$deb" "$dir/"
    chmod 755 "$dir" && chmod 644 "$dir/$(basename "$deb")"
    # As nobody: lintian unpacks what it checks and should not be root.
    unshare --mount --propagation private -- bash -c '
        mount -t proc proc "$1/proc" && exec chroot "$1" setpriv --reuid=65534 --regid=65534 --clear-groups \
            env -i PATH=/usr/bin:/bin LANG=C.UTF-8 HOME=/tmp \
            lintian --tag-display-limit 0 --fail-on none --info --display-info --show-overrides "$2"
    ' _ "$build_chroot" "${dir#"$build_chroot"}/$(basename "$deb")"
    local status=$?
    rm -rf "$dir"
    return "$status"
}
