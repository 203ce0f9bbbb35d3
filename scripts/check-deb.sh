#!/usr/bin/env bash
# Builds the Debian package with scripts/build-deb.sh and checks it as a
# packager would: lintian (any error or warning fails, but for the
# overrides the package ships, each with its reason), the control fields,
# every file it installs, the documentation's links, the binary's
# --version, the man pages and what they name, the completions, the sync
# timer's and the check's units as systemd reads them, and that apt can
# resolve its dependencies on this machine. For this machine's
# architecture it also installs the package with apt in a clean Debian
# bookworm root, as an upgrade of the previous build (the check's timer
# enabled, the sync's not), runs its sync timer's set-up there, and
# removes and purges it, checking that the purge leaves nothing of
# pimigrate's. For --arch arm64 or armhf (cross-built,
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
ensure_packages groff=groff-base objdump=binutils systemd-analyze=systemd
[[ $cross == yes ]] && ensure_qemu_user

# The package to upgrade from: main's commit that made the package's first
# revision (0.1.0-1), the one users could have built and installed.
previous_commit=5674b72

# ensure_previous_deb: that commit's package for this machine, built once
# from its files with its own build-deb.sh (in a target folder of its own)
# and kept in the build cache; prints its path.
ensure_previous_deb() {
    local dir=$build_cache/previous-$previous_commit deb src
    deb=$(find "$dir" -name "pimigrate_*_$host_arch.deb" 2>/dev/null | head -1)
    if [[ -z $deb ]]; then
        if ! git cat-file -e "$previous_commit^{commit}" 2>/dev/null; then
            echo "error: commit $previous_commit is not in this clone (shallow? git fetch --unshallow)" >&2
            return 1
        fi
        say "building the package of commit $previous_commit once, to upgrade from"
        src=$(mktemp -d /var/tmp/pimigrate-previous.XXXXXX)
        git archive "$previous_commit" | tar -x -C "$src" &&
            deb=$(cd "$src" && CARGO_TARGET_DIR=$build_cache/previous-target scripts/build-deb.sh | tail -1) &&
            mkdir -p "$dir" && cp "$deb" "$dir/" || { rm -rf "$src"; return 1; }
        deb=$dir/$(basename "$deb")
        rm -rf "$src"
    fi
    echo "$deb"
}

# apt_lifecycle ROOT PREVIOUS NEW: the install, upgrade, remove and purge,
# with apt, in an overlay of ROOT that vanishes afterwards. Prints
# "RESULT ok WHAT" or "RESULT FAIL WHAT" for each check.
apt_lifecycle() {
    local root=$1 work status
    work=$(mktemp -d /var/tmp/pimigrate-apt.XXXXXX)
    mkdir -p "$work"/{upper/tmp,work,merged}
    cp "$2" "$work/upper/tmp/previous.deb"
    cp "$3" "$work/upper/tmp/new.deb"
    unshare --mount --propagation private -- bash -c '
        set -e
        mount -t overlay overlay -o "lowerdir=$1,upperdir=$2/upper,workdir=$2/work" "$2/merged"
        for fs in dev proc sys; do mount --rbind "/$fs" "$2/merged/$fs"; done
        exec chroot "$2/merged" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
            DEBIAN_FRONTEND=noninteractive NEW_VERSION="$3" sh -s
    ' _ "$root" "$work" "$version" <<'SCRIPT'
set -u
ok() { echo "RESULT ok $*"; }
bad() { echo "RESULT FAIL $*"; }
check() { what=$1; shift; if "$@" >/dev/null 2>&1; then ok "$what"; else bad "$what"; fi; }
apt() { apt-get -y -q -o Dpkg::Use-Pty=0 "$@" >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; return 1; }; }
installed() { dpkg-query -W -f='${Version}' pimigrate 2>/dev/null; }
etc=/etc/systemd/system

apt install /tmp/previous.deb
check "apt installs the previous build (pimigrate $(installed))" test "$(installed)" = 0.1.0-1
# Its timer, set up the old way: whole units in /etc/systemd/system (it
# fails without a running systemd after writing them, as it did in a chroot).
pimigrate sync --install-timer daily >/tmp/old-timer.log 2>&1
check "the previous build writes its timer's units into $etc" test -f $etc/pimigrate-sync.timer
# What pimigrate keeps as it runs: its state and its logs.
mkdir -p /var/lib/pimigrate/reports /var/log/pimigrate
echo '{}' >/var/lib/pimigrate/standby.json
echo 'a migration' >/var/log/pimigrate/migrate-1.log

apt install /tmp/new.deb
check "apt upgrades it to $NEW_VERSION" test "$(installed)" = "$NEW_VERSION"
check "the package's units are in /usr/lib/systemd/system" test -f /usr/lib/systemd/system/pimigrate-sync.timer
check "the package enables no sync timer" test ! -e $etc/timers.target.wants/pimigrate-sync.timer
check "the package enables the check's timer" test -L $etc/timers.target.wants/pimigrate-check.timer
check "the check says there is nothing to check without a migration (exit 0)" \
    sh -c 'out=$(pimigrate status --check) && echo "$out" | grep -q "^Nothing to check: "'
pimigrate sync --install-timer weekly --exclude '/srv/a b' >/tmp/timer.log 2>&1
status=$?
check "sync --install-timer sets the timer up (exit $status: $(tail -1 /tmp/timer.log))" test $status = 0
check "it replaces the previous build's units by drop-ins" \
    test ! -e $etc/pimigrate-sync.timer -a ! -e $etc/pimigrate-sync.service -a -f $etc/pimigrate-sync.timer.d/50-pimigrate.conf
check "the drop-in carries the schedule" grep -qx 'OnCalendar=weekly' $etc/pimigrate-sync.timer.d/50-pimigrate.conf
check "systemctl sees the timer enabled" systemctl --root=/ is-enabled pimigrate-sync.timer

apt remove pimigrate
check "remove takes the program and the units" test ! -e /usr/bin/pimigrate -a ! -e /usr/lib/systemd/system/pimigrate-sync.timer
check "remove keeps the timer's configuration, the state and the logs" \
    test -f $etc/pimigrate-sync.timer.d/50-pimigrate.conf -a -f /var/lib/pimigrate/standby.json -a -f /var/log/pimigrate/migrate-1.log

apt purge pimigrate
check "after the purge dpkg knows no pimigrate" test -z "$(dpkg-query -W -f='${Status}' pimigrate 2>/dev/null | grep -v not-installed)"
# (/.pimigrate-ready marks the root as made; /tmp holds the packages.)
left=$(find / -xdev \( -path /tmp -o -path /.pimigrate-ready \) -prune -o -name '*pimigrate*' -print)
check "purge leaves nothing of pimigrate's${left:+ (left: $(echo $left))}" test -z "$left"
SCRIPT
    status=$?
    rm -rf "$work"
    return "$status"
}

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

upstream=$(sed -nE 's/^version = "([^"]+)"/\1/p' Cargo.toml | head -1)
version=$upstream-$(sed -nE 's/^revision = "([^"]+)"/\1/p' Cargo.toml | head -1)
field() { dpkg-deb -f "$deb" "$1"; }
check "Package is pimigrate" test "$(field Package)" = pimigrate
check "Version is $version" test "$(field Version)" = "$version"
maintainer=$(field Maintainer)
check "Maintainer has a name and an address ($maintainer)" grep -qE '^[^<>@]+ <[^<>@ ]+@[^<>@ ]+\.[a-z]+>$' <<<"$maintainer"
[[ $maintainer == *.invalid\>* ]] &&
    echo "deb: note: the Maintainer is the placeholder role address; set the project's own before publishing (docs/packaging.md)"
recommends=$(field Recommends)
for pkg in rpi-eeprom raspi-utils; do
    check "Recommends names $pkg ($recommends)" grep -qw "$pkg" <<<"$recommends"
done
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
check "installs the README" installs -rw-r--r-- usr/share/doc/pimigrate/README.md.gz
check "installs the copyright file" installs -rw-r--r-- usr/share/doc/pimigrate/copyright
check "installs changelog.Debian.gz" installs -rw-r--r-- usr/share/doc/pimigrate/changelog.Debian.gz
for unit in pimigrate-sync.service pimigrate-sync.timer pimigrate-check.service pimigrate-check.timer; do
    check "installs the unit $unit" installs -rw-r--r-- "usr/lib/systemd/system/$unit"
done
for script in postinst prerm postrm; do
    check "has the maintainer script $script (executable)" grep -qE "[*] +$script +#!/bin/sh" <<<"$(dpkg-deb -I "$deb")"
done
check "installs the login message, mode 755" installs -rwxr-xr-x etc/update-motd.d/60-pimigrate

tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
dpkg-deb -x "$deb" "$tree"
bin=$tree/usr/bin/pimigrate

doc=$tree/usr/share/doc/pimigrate
# The changelog's newest entry is this version, signed by the Maintainer.
newest=$(zcat "$doc/changelog.Debian.gz" | head -1)
check "changelog.Debian.gz starts at $version ($newest)" grep -q "^pimigrate ($version) " <<<"$newest"
signer=$(zcat "$doc/changelog.Debian.gz" | sed -nE 's/^ -- (.*>)  .*/\1/p' | head -1)
check "changelog.Debian.gz is signed by the Maintainer ($signer)" test "$signer" = "$maintainer"
check "copyright is machine-readable (DEP-5) and names the crates linked" \
    grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/$' "$doc/copyright"
check "copyright names the crates linked into the program (clap, nix)" \
    grep -qE '^ (clap|nix) [0-9.]+: ' "$doc/copyright"
# The tool crate's (xtask/: man pages, completions) are not linked.
check "copyright names no crate only the tools use (clap_mangen, clap_complete, roff)" \
    bash -c '! grep -qE "^ (clap_mangen|clap_complete|roff) [0-9.]+: " "$1"' _ "$doc/copyright"

# Every link between the installed pages leads to a file of the package.
doc_links_ok() {
    local page text target path bad=0
    while IFS= read -r -d '' page; do
        case $page in *.gz) text=$(zcat "$page") ;; *) text=$(cat "$page") ;; esac
        while IFS= read -r target; do
            target=${target#](} target=${target%)} path=${target%%#*}
            [[ -z $path || $path == *://* || $path == mailto:* ]] && continue
            if [[ ! -e $(realpath -m "$(dirname "$page")/$path") ]]; then
                echo "  ${page#"$tree"} links $target, which the package does not install"
                bad=1
            fi
        done < <(grep -oE '\]\([^) ]+\)' <<<"$text")
    done < <(find "$doc" -name '*.md*' -print0)
    return "$bad"
}
check "the installed documentation's links lead to installed files" doc_links_ok
check "the documentation is more than the README ($(find "$doc" -name '*.md*' | wc -l) pages)" \
    test "$(find "$doc" -name '*.md*' | wc -l)" -gt 1

# The packaged units as systemd reads them (ExecStart's program looked up
# in the package's tree).
if command -v systemd-analyze >/dev/null; then
    verified=$(systemd-analyze verify --root="$tree" --man=no --recursive-errors=no \
        pimigrate-sync.service pimigrate-sync.timer pimigrate-check.service pimigrate-check.timer 2>&1)
    check "systemd-analyze verify accepts the packaged units${verified:+: $verified}" test -z "$verified"
else
    fail "systemd-analyze (systemd) is installed to check the units"
fi

# lintian: an error or a warning fails, but for the package's overrides
# (usr/share/lintian/overrides/pimigrate, each with its reason).
ensure_lintian
report=$(run_lintian "$deb" 2>&1)
status=$?
check "lintian ran (exit $status)${report:+}" test "$status" = 0
hints=$(grep -E '^(E|W): ' <<<"$report")
check "lintian finds no error or warning${hints:+:$'\n'$hints}" test -z "$hints"
overridden=$(grep -cE '^O: ' <<<"$report")
echo "deb: lintian: $(grep -cE '^I: ' <<<"$report") info hints, $overridden overridden (each with its reason in the package's override file)"

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
check "--version names the commit ($out)" grep -qE "^pimigrate $upstream \\($commit(-dirty)?\\)$" <<<"$out"

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
# The files the man pages name in /usr/share/doc are installed.
for named in $(zcat "$tree"/usr/share/man/man1/*.1.gz | grep -oE '/usr/share/doc/pimigrate/[A-Za-z0-9_./-]*[A-Za-z0-9]' | sort -u); do
    check "the man pages name $named, which is installed" test -e "$tree$named"
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

    # Install, upgrade, remove and purge with apt in a clean Debian
    # bookworm root with systemd (made once; each run works on an overlay
    # of it, so the root stays clean): the previous build (main's commit
    # $previous_commit, the package's first revision) is installed and
    # sets up its sync timer the old way; this package upgrades it, its
    # `sync --install-timer` replaces the old units by drop-ins and enables
    # the timer (offline: systemd does not run in the root); then remove
    # and purge, after which nothing of pimigrate's may be left but dpkg's
    # and apt's own logs.
    lifecycle_started=$SECONDS
    if previous=$(ensure_previous_deb); then
        apt_root=$(ensure_pi_root "$arch" systemd) || { fail "a Debian bookworm $arch root with systemd"; finish; }
        report=$(apt_lifecycle "$apt_root" "$previous" "$deb" 2>&1)
        while IFS= read -r line; do
            case $line in
                "RESULT ok "*) ok "apt: ${line#RESULT ok }" ;;
                "RESULT FAIL "*) fail "apt: ${line#RESULT FAIL }" ;;
            esac
        done <<<"$report"
        grep -qE '^RESULT (ok|FAIL) purge leaves nothing' <<<"$report" ||
            { fail "apt: the install, upgrade, remove and purge ran to the end"; tail -30 <<<"$report"; }
        echo "deb: apt: install, upgrade, remove and purge took $((SECONDS - lifecycle_started)) s"
    else
        fail "the previous build ($previous_commit) to upgrade from"
    fi
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
check "pimigrate --version runs in the bookworm $arch root ($out)" grep -qE "^pimigrate $upstream \\(" <<<"$out"

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
