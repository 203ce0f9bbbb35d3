#!/usr/bin/env bash
# Builds the Debian package with scripts/build-deb.sh and checks it as a
# packager would: the control fields, every file it installs, the binary's
# --version, the man pages, the completions, and that apt can resolve its
# dependencies on this machine. Each check prints `deb: ok ...` or
# `deb: FAIL ...`; the last line is `deb: N passed, N failed`.
#
#   scripts/check-deb.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

ensure_build_tools
# groff renders the man pages as `man` does; dpkg-deb and apt come with Debian.
ensure_packages groff=groff-base

passed=0 failed=0
ok() { echo "deb: ok   $*"; passed=$((passed + 1)); }
fail() { echo "deb: FAIL $*"; failed=$((failed + 1)); }
check() { # check DESCRIPTION COMMAND...: ok when the command succeeds
    local what=$1
    shift
    if "$@"; then ok "$what"; else fail "$what"; fi
}
finish() {
    echo "deb: $passed passed, $failed failed"
    [[ $failed == 0 ]]
    exit
}

target_dir=${CARGO_TARGET_DIR:-$PWD/target}
rm -f "$target_dir"/debian/pimigrate_*.deb
say "building the .deb (scripts/build-deb.sh)"
if ! scripts/build-deb.sh >&2; then
    fail "scripts/build-deb.sh builds the package"
    finish
fi
debs=("$target_dir"/debian/pimigrate_*.deb)
if [[ ${#debs[@]} != 1 || ! -f ${debs[0]} ]]; then
    fail "exactly one package in $target_dir/debian (found: ${debs[*]})"
    finish
fi
deb=${debs[0]}
ok "built $(basename "$deb")"

version=$(sed -nE 's/^version = "([^"]+)"/\1/p' Cargo.toml | head -1)
field() { dpkg-deb -f "$deb" "$1"; }
check "Package is pimigrate" test "$(field Package)" = pimigrate
check "Version is $version-1" test "$(field Version)" = "$version-1"
check "Architecture is this machine's ($(dpkg --print-architecture))" \
    test "$(field Architecture)" = "$(dpkg --print-architecture)"
depends=$(field Depends)
for pkg in e2fsprogs dosfstools libc6; do
    check "Depends names $pkg ($depends)" grep -qw "$pkg" <<<"$depends"
done

# Every file the package installs, with its mode.
listing=$(dpkg-deb -c "$deb")
installs() { # installs MODE PATH
    awk -v mode="$1" -v path="./$2" '$1 == mode && $6 == path { found = 1 } END { exit !found }' <<<"$listing"
}
check "installs /usr/bin/pimigrate, mode 755" installs -rwxr-xr-x usr/bin/pimigrate
check "installs the bash completion" installs -rw-r--r-- usr/share/bash-completion/completions/pimigrate
check "installs the zsh completion" installs -rw-r--r-- usr/share/zsh/vendor-completions/_pimigrate
check "installs the fish completion" installs -rw-r--r-- usr/share/fish/vendor_completions.d/pimigrate.fish
check "installs the README" installs -rw-r--r-- usr/share/doc/pimigrate/README.md

tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
dpkg-deb -x "$deb" "$tree"
bin=$tree/usr/bin/pimigrate

# The packaged binary runs and names the commit it was built from.
out=$("$bin" --version 2>&1)
commit=$(git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
check "--version names the commit ($out)" grep -qE "^pimigrate $version \\($commit(-dirty)?\\)$" <<<"$out"

# A man page for pimigrate and for each subcommand, each rendering
# without a warning.
mapfile -t subcommands < <("$bin" --help | awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { exit }' | grep -vx help)
check "--help lists subcommands (${subcommands[*]})" test "${#subcommands[@]}" -ge 8
for page in pimigrate "${subcommands[@]/#/pimigrate-}"; do
    file=$tree/usr/share/man/man1/$page.1.gz
    if [[ ! -f $file ]]; then
        fail "man page $page(1) is installed"
        continue
    fi
    warnings=$(zcat "$file" | groff -man -Tutf8 -ww -z 2>&1)
    check "man page $page(1) renders without warnings${warnings:+: $warnings}" test -z "$warnings"
done

# The bash completion completes the subcommands.
completions=$(bash -c '
    source "$1"
    COMP_WORDS=(pimigrate "") COMP_CWORD=1 COMP_LINE="pimigrate " COMP_POINT=10
    _pimigrate pimigrate "" pimigrate
    printf "%s\n" "${COMPREPLY[@]}"' _ "$tree/usr/share/bash-completion/completions/pimigrate")
for sub in "${subcommands[@]}"; do
    check "bash completes the subcommand $sub" grep -qx "$sub" <<<"$completions"
done

# apt can install it here: every dependency resolves (a simulation; nothing
# is installed).
apt_resolves() { apt-get -s -q install "$deb" >/dev/null 2>&1; }
check "apt-get resolves its dependencies (apt-get -s install)" apt_resolves

finish
