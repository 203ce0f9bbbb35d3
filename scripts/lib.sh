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
