# Shared by the scripts in this directory: sourced, not run.

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# ensure_packages TOOL=PACKAGE...: installs the Debian packages whose tools
# are missing, refreshing the package lists once if the first try fails.
ensure_packages() {
    local pair tool pkg missing=()
    for pair in "$@"; do
        tool=${pair%%=*} pkg=${pair#*=}
        command -v "$tool" >/dev/null 2>&1 || [[ -x /usr/sbin/$tool || -x /sbin/$tool ]] || missing+=("$pkg")
    done
    [[ ${#missing[@]} == 0 ]] && return 0
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    say "installing ${missing[*]}"
    [[ $(id -u) == 0 ]] || die "missing ${missing[*]}: run this script with sudo"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
        || { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; } \
        || die "could not install ${missing[*]}"
}

# ensure_cargo: puts a Rust toolchain on PATH, installing rustup if there
# is none (sudo drops the invoking user's ~/.cargo/bin from PATH).
ensure_cargo() {
    command -v cargo >/dev/null 2>&1 && return 0
    local home
    for home in "${SUDO_USER:+$(getent passwd "$SUDO_USER" | cut -d: -f6)}" "$HOME"; do
        if [[ -n $home && -x $home/.cargo/bin/cargo ]]; then
            export PATH="$home/.cargo/bin:$PATH"
            return 0
        fi
    done
    ensure_packages curl=curl
    say "installing Rust with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c clippy -c rustfmt >&2 \
        || die "could not install Rust; see https://rustup.rs"
    export PATH="$HOME/.cargo/bin:$PATH"
}

ensure_build_tools() {
    ensure_packages cc=gcc pkg-config=pkg-config
    ensure_cargo
}
