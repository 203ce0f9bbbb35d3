#!/usr/bin/env bash
# Builds the Debian package with scripts/build-deb.sh and checks it as a
# packager would: the control fields, every file it installs, the binary's
# --version, the man pages, the completions, and that apt can resolve its
# dependencies on this machine. For --arch arm64 or armhf (cross-built,
# scripts/build-deb.sh) it also checks that the binary is for that CPU and
# needs glibc 2.31 at most (Raspberry Pi OS bullseye's), runs it under
# qemu-user, and installs the package in a Debian bookworm root of that
# architecture, where the arm64 one lists devices and plans a move onto a
# loop device. Each check prints `deb: ok ...` or `deb: FAIL ...`; the last
# line is `deb: N passed, N failed`.
#
#   scripts/check-deb.sh                 # this machine's architecture
#   scripts/check-deb.sh --arch arm64    # or armhf
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

host_arch=$(dpkg --print-architecture)
arch=$host_arch
while [[ $# -gt 0 ]]; do
    case $1 in
        --arch) arch=${2:?--arch needs arm64, armhf or $host_arch}; shift 2 ;;
        --arch=*) arch=${1#--arch=}; shift ;;
        *) die "unknown option $1 (see the comment at the top of $0)" ;;
    esac
done
cross=no
[[ $arch != "$host_arch" ]] && cross=yes

[[ $cross == no ]] && ensure_build_tools
# groff renders the man pages as `man` does; objdump and readelf read the
# binary; dpkg-deb and apt come with Debian.
ensure_packages groff=groff-base objdump=binutils
[[ $cross == yes ]] && ensure_qemu_user

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
[[ $cross == yes ]] && target_dir=$PWD/target
rm -f "$target_dir"/debian/pimigrate_*_"$arch".deb
say "building the $arch .deb (scripts/build-deb.sh --arch $arch)"
started=$SECONDS
if ! scripts/build-deb.sh --arch "$arch" >&2; then
    fail "scripts/build-deb.sh --arch $arch builds the package"
    finish
fi
debs=("$target_dir"/debian/pimigrate_*_"$arch".deb)
if [[ ${#debs[@]} != 1 || ! -f ${debs[0]} ]]; then
    fail "exactly one $arch package in $target_dir/debian (found: ${debs[*]})"
    finish
fi
deb=${debs[0]}
ok "built $(basename "$deb") in $((SECONDS - started)) s"

version=$(sed -nE 's/^version = "([^"]+)"/\1/p' Cargo.toml | head -1)
field() { dpkg-deb -f "$deb" "$1"; }
check "Package is pimigrate" test "$(field Package)" = pimigrate
check "Version is $version-1" test "$(field Version)" = "$version-1"
check "Architecture is $arch ($(field Architecture))" test "$(field Architecture)" = "$arch"
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
check "installs the login message, mode 755" installs -rwxr-xr-x etc/update-motd.d/60-pimigrate

tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
dpkg-deb -x "$deb" "$tree"
bin=$tree/usr/bin/pimigrate

# The binary is for that CPU (readelf's Machine line) and ABI.
header=$(readelf -h "$bin" 2>&1)
machine=$(sed -nE 's/^ *Machine: *//p' <<<"$header")
case $arch in
    arm64) check "the binary is for AArch64 ($machine)" test "$machine" = AArch64 ;;
    armhf)
        check "the binary is for 32-bit ARM ($machine)" test "$machine" = ARM
        check "the binary uses the hard-float ABI (armhf)" grep -q 'hard-float ABI' <<<"$header" ;;
    amd64) check "the binary is for x86-64 ($machine)" grep -q 'X86-64' <<<"$machine" ;;
    *) check "the binary's CPU ($machine) is $arch's: no rule for $arch here" false ;;
esac

# The C library it needs: Raspberry Pi OS bullseye has glibc 2.31, so a
# Pi package must need no symbol version above it; a native build needs at
# most this machine's glibc.
needs=$(highest_glibc "$bin")
if [[ $cross == yes ]]; then
    limit=$pi_glibc where="Raspberry Pi OS bullseye's"
else
    limit=$(ldd --version | head -1 | grep -Eo '[0-9]+\.[0-9]+$') where="this machine's"
fi
check "needs glibc ${needs:-none (static)}, at most $limit ($where; objdump -T)" \
    test "$(printf '%s\n' "${needs:-0}" "$limit" | sort -V | tail -1)" = "$limit"
# build-deb.sh sets a cross build's libc6 dependency from the binary.
[[ $cross == yes ]] && check "Depends asks for the libc6 the binary needs (libc6 >= ${needs:-?})" \
    grep -q "libc6 (>= ${needs:-none})" <<<"$depends"

# A foreign binary runs under qemu-user with the trixie chroot's C library
# for its loader; the bookworm root below runs it with bookworm's.
if [[ $cross == yes ]]; then
    export QEMU_LD_PREFIX=$build_chroot
fi
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

if [[ $cross == no ]]; then
    # apt can install it here: every dependency resolves (a simulation;
    # nothing is installed).
    apt_resolves() { apt-get -s -q install "$deb" >/dev/null 2>&1; }
    check "apt-get resolves its dependencies (apt-get -s install)" apt_resolves
    finish
fi

# Installed in a Debian bookworm root of that architecture (Raspberry Pi OS
# bookworm's base, glibc 2.36), run there under qemu-user. Bullseye's
# archive is out of reach here, so glibc 2.31 is proven by the objdump
# check above, not by a bullseye root.
unset QEMU_LD_PREFIX
root=$(ensure_pi_root "$arch") || { fail "a Debian bookworm $arch root"; finish; }
cp "$deb" "$root/tmp/pimigrate.deb"
in_pi_root() { # in_pi_root COMMAND...: runs COMMAND in the bookworm root with /dev, /proc, /sys
    unshare --mount --propagation private -- bash -euc '
        root=$1; shift
        for fs in dev proc sys; do mount --rbind "/$fs" "$root/$fs"; done
        exec chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"
    ' _ "$root" "$@"
}
check "dpkg -i installs it in a bookworm $arch root (every dependency met)" \
    in_pi_root sh -c 'dpkg -i /tmp/pimigrate.deb >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; exit 1; }'
out=$(in_pi_root pimigrate --version 2>&1)
check "pimigrate --version runs in the bookworm $arch root ($out)" grep -qE "^pimigrate $version \\(" <<<"$out"

if [[ $arch == arm64 ]]; then
    # devices and plan on a real block device: a sparse image on a loop
    # device (whole disk: the kernel here may have no partition tables),
    # planned for the Pi 4 fixture's files.
    image=$(mktemp -p /var/tmp pimigrate-deb-XXXXXX.img)
    truncate -s 8G "$image"
    loop=$(losetup -f --show "$image")
    trap 'losetup -d "$loop" 2>/dev/null; rm -f "$image"; rm -rf "$tree"' EXIT
    rm -rf "$root/srv/pi" && mkdir -p "$root/srv/pi"
    cp -a tests/fixtures/pi4/{etc,boot,var,home,usr,tmp} "$root/srv/pi/"
    out=$(in_pi_root pimigrate devices --all 2>&1)
    check "pimigrate devices in the bookworm arm64 root lists $loop" grep -q "^$loop " <<<"$out"
    out=$(in_pi_root pimigrate plan --json --target "$loop" --source-root /srv/pi --boot-dir /srv/pi/boot/firmware 2>&1)
    check "pimigrate plan onto $loop in the bookworm arm64 root" grep -q "\"path\": \"$loop\"" <<<"$out"
    check "the plan wrote nothing to $loop" cmp -s -n 1048576 "$loop" /dev/zero
fi

finish
