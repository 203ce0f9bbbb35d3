#!/usr/bin/env bash
# The tests on ARM: the unit, fixture-machine and host tests of the
# pimigrate crate (not the pi-testbed member), built for aarch64 (arm64)
# and armv7 (armhf) in the Debian trixie build chroot with its Rust 1.85,
# which is Cargo.toml's rust-version, so the build also proves that the
# lockfile builds with it, and run on this machine under qemu-user
# (binfmt), as root like the x86 run (loop devices, mounts). On a fresh
# machine it installs what it needs; the chroot and the builds are cached
# under /var/cache/pimigrate-build, outside the checkout.
#
#   sudo scripts/test-arm.sh
#   sudo scripts/test-arm.sh --build-only   # build the tests, run none
#   sudo scripts/test-arm.sh --arch arm64   # one architecture (or armhf)
#   sudo scripts/test-arm.sh --bookworm-qemu  # under Debian 12's own
#       qemu-user-static (7.2) instead of QEMU 10, to compare the two
#
# The tests run under QEMU 10's qemu-user, which scripts/lib.sh unpacks
# from bookworm-backports and registers with binfmt_misc: bookworm's 7.2
# deadlocks now and then in a fork of a multithreaded program (below).
#
# (--build-only is what scripts/test.sh does beside the testbed's speed
# scenarios, at the lowest priority; the full run later finds them built.)
#
# Each test binary's result is printed, then per architecture
# `arm64: N passed, N failed` and `armhf: N passed, N failed`, the tests
# that cannot run under qemu-user with the reason, and last
# `arm: N passed, N failed` (both architectures, and the rust-version check).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

# A prerequisite that is missing stops the run with an error and one
# failure in the summary line, in CI too: never a quiet pass.
stop() {
    echo "error: $*" >&2
    echo "arm: 0 passed, 1 failed"
    exit 1
}
if [[ $(id -u) != 0 ]]; then
    [[ ${CI:-} == true ]] && stop "CI must run the ARM tests as root (loop devices, mounts, the build chroot)"
    stop "run as root: sudo $0 $*"
fi
[[ $(dpkg --print-architecture) == amd64 ]] || stop "the ARM tests run on an x86_64 Debian or Ubuntu machine"
build_only=no arches=(arm64 armhf) bookworm_qemu=no
while [[ $# -gt 0 ]]; do
    case $1 in
        --build-only) build_only=yes ;;
        --arch)
            [[ ${2:-} == arm64 || ${2:-} == armhf ]] || stop "--arch takes arm64 or armhf"
            arches=("$2")
            shift ;;
        --bookworm-qemu) bookworm_qemu=yes ;;
        *) stop "unknown option $1 (see the comment at the top of $0)" ;;
    esac
    shift
done
started=$SECONDS

# Tests that cannot run under qemu-user, with the reason; they are named in
# the output, never skipped silently. Entries are "TEST NAME: REASON".
# (io_uring's ENOSYS falls back to the thread engine, and statx's zero
# direct I/O alignments are probed (src/bench/dio.rs): those run.)
# The hang-up tests need a pseudo-terminal: qemu-user looks up /dev/ptmx
# under QEMU_LD_PREFIX first, and finds the build chroot's, which has no
# devpts behind it (posix_openpt fails). What they check is signal
# handling, the same code on every architecture; the x86 host runs them,
# and the testbed drops an SSH session on the emulated Pi.
not_under_qemu=(
    "migrate_host::a_terminal_that_hangs_up_mid_copy_leaves_the_migration_running_into_its_log: no pseudo-terminal under qemu-user (the build chroot's /dev/ptmx)"
    "sync_host::a_terminal_that_hangs_up_mid_copy_leaves_the_sync_running_into_its_log: no pseudo-terminal under qemu-user (the build chroot's /dev/ptmx)"
)

# Each helper exits on what it cannot install: run them in a subshell so
# the summary line still comes last.
(
    ensure_build_chroot
    ensure_qemu_user
    # What the host tests run, as in scripts/test.sh.
    ensure_packages mkfs.ext4=e2fsprogs losetup=mount mkfs.vfat=dosfstools mcopy=mtools sfdisk=fdisk \
        rsync=rsync setfacl=acl getfattr=attr setcap=libcap2-bin fio=fio tmux=tmux groff=groff-base \
        mkfs.btrfs=btrfs-progs
) || stop "the ARM tests' prerequisites are missing (see above)"

passed=0 failed=0
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# --bookworm-qemu: pimigrate's QEMU 10 entries stay off for this run, so
# that Debian's qemu-user-static (7.2) runs the binaries; back on at exit.
if [[ $bookworm_qemu == yes ]]; then
    grep -qsx enabled /proc/sys/fs/binfmt_misc/qemu-aarch64 && grep -qsx enabled /proc/sys/fs/binfmt_misc/qemu-arm ||
        stop "--bookworm-qemu needs Debian's qemu-user-static and binfmt-support (apt-get install qemu-user-static binfmt-support)"
    for entry in /proc/sys/fs/binfmt_misc/pimigrate-qemu-*; do echo 0 >"$entry"; done
    trap 'rm -rf "$logs"; for entry in /proc/sys/fs/binfmt_misc/pimigrate-qemu-*; do echo 1 >"$entry"; done' EXIT
fi
qemu_version=$(qemu_user_version) || qemu_version=unknown
echo "arm: the binaries run under qemu-user $qemu_version (binfmt_misc)"

# The test binaries are built with opt-level 1: unoptimised code runs
# several times slower under emulation, and this keeps debug assertions and
# overflow checks. Line tables only keep the builds small.
build_env=(env CARGO_PROFILE_DEV_OPT_LEVEL=1 CARGO_PROFILE_TEST_OPT_LEVEL=1
    CARGO_PROFILE_DEV_DEBUG=line-tables-only CARGO_PROFILE_TEST_DEBUG=line-tables-only
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
    CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_LINKER=arm-linux-gnueabihf-gcc)

rustc=$(in_build_chroot / rustc --version | awk '{print $2}')
need=$(rust_version_needed)
targets=()
for arch in "${arches[@]}"; do
    targets+=(--target "$(triple_of "$arch")")
done
say "building the tests for ${arches[*]} with rustc $rustc (rust-version $need)"
build_started=$SECONDS
# -p pimigrate --tests: the product's test targets only; plain `cargo
# test` also builds the examples (copy-tree, a host benchmark's driver),
# and the tool crate (xtask/: docs, man pages, the package's files) is
# the host's, never built for a Pi.
if in_build_chroot "$PWD" "${build_env[@]}" cargo test --locked -p pimigrate --tests --no-run \
    "${targets[@]}" --message-format=json-render-diagnostics >"$logs/build.json" 2>"$logs/build.err"; then
    build_ok=yes
else
    build_ok=no
    cat "$logs/build.err"
fi
build_seconds=$((SECONDS - build_started))
if [[ $build_ok == yes && ${rustc%.*} == "$need" ]]; then
    echo "arm: ok   the lockfile builds with rustc $rustc, Cargo.toml's rust-version $need ($build_seconds s)"
    passed=$((passed + 1))
else
    echo "arm: FAIL the lockfile builds with rustc $rustc, Cargo.toml's rust-version $need (build: $build_ok)"
    failed=$((failed + 1))
fi

if [[ $build_only == yes ]]; then
    echo "arm: --build-only: the tests were built ($build_ok, $build_seconds s), none ran"
    [[ $build_ok == yes ]]
    exit
fi

# The test executables of TRIPLE, one "SOURCE EXECUTABLE" a line
# (src/lib.rs, tests/cli_fixtures.rs, ...): artifacts built by the test
# profile (the pimigrate binary the tests run is built too, not as a test).
executables() { # executables TRIPLE
    grep '"reason":"compiler-artifact"' "$logs/build.json" | grep -E '"profile":\{[^}]*"test":true' \
        | grep "/$1/" | sed -nE 's|.*"src_path":"'"$PWD"'/([^"]*)".*"executable":"([^"]*)".*|\1 \2|p'
}

skip_args=()
for entry in "${not_under_qemu[@]}"; do
    skip_args+=(--skip "${entry%%: *}")
done
[[ ${#skip_args[@]} -gt 0 ]] && skip_args+=(--exact)

# Test binaries that use the machine itself (loop devices, mounts,
# /run/pimigrate, /var/tmp): like cargo test on x86, which runs binaries one
# at a time, never two of them at once. The rest (fixture machines, unit
# tests) may run beside them. The integration tests are one binary,
# tests/tests.rs, whose modules include the host tests.
host_tests='^tests/tests\.rs$'

# qemu-user's fork deadlock. Now and then a child that a test binary forks
# under qemu-user (7.2, bookworm's) never gets to its exec: it waits on a
# lock that another thread of the emulated parent held when it forked, and
# the test waits on it for ever (seen here: a migrate_faults child stuck
# 15 minutes in futex_wait while the rest of the binary waited behind it;
# CI's run of the same tests was stopped at 90 minutes). Such a child is
# still the test binary: its command line is its parent's. That is the
# emulator's fault, not the code's, so run_watched stops the stuck child
# (the test then fails on it, and the binary cleans up after itself as it
# ends) and the binary runs again, up to twice, with its earlier run's
# results set aside in the log. The tests run under QEMU 10, where this was
# not seen (docs/internals/arm-tests.md has the counts); the watchdog stays as a guard,
# and its count is printed for each architecture.
stuck_after=60

# stuck_child PID: prints a process under PID (PID's child, or the child of
# a process the tests started, such as pimigrate, which is multithreaded
# under qemu-user too) that has been a copy of its parent, not yet exec'd,
# for $stuck_after seconds or more.
stuck_child() {
    local parent=$1 child own
    own=$(cmdline_of "$parent")
    [[ -n $own ]] || return 1
    for child in $(pgrep -P "$parent"); do
        if [[ $(cmdline_of "$child") == "$own" ]] &&
            (($(ps -o etimes= -p "$child" 2>/dev/null || echo 0) >= stuck_after)); then
            echo "$child"
            return 0
        fi
        stuck_child "$child" && return 0
    done
    return 1
}

cmdline_of() {
    cat "/proc/$1/cmdline" 2>/dev/null | tr '\0' ' '
}

# run_watched LOG EXE ARGS...: runs a test binary into LOG; exits 125 if
# it had a stuck child (which it stopped), else with the binary's status.
run_watched() {
    local log=$1 pid child stuck=no status
    shift
    "$@" >"$log" 2>&1 </dev/null &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 5
        if child=$(stuck_child "$pid"); then
            echo "arm: qemu-user's fork deadlock: child $child of $(basename "$2") stuck before its exec for ${stuck_after}s or more; stopping it" >>"$log"
            kill -KILL "$child" 2>/dev/null
            stuck=yes
        fi
    done
    wait "$pid"
    status=$?
    [[ $stuck == yes ]] && return 125
    return "$status"
}

# run_tests TRIPLE DEB_ARCH host|pure: runs those test binaries of TRIPLE;
# appends "passed failed" to $logs/DEB_ARCH.count.
run_tests() {
    local triple=$1 arch=$2 kind=$3 source exe name p f total_p=0 total_f=0 status line attempt
    # The dynamic loader and C library of the target come from the chroot.
    export QEMU_LD_PREFIX=$build_chroot
    while read -r source exe; do
        if [[ $source =~ $host_tests ]]; then
            [[ $kind == host ]] || continue
        else
            [[ $kind == pure ]] || continue
        fi
        name=$(basename "$exe")
        for attempt in 1 2 3; do
            run_watched "$logs/$arch-$name.log" "$exe" "${skip_args[@]}"
            status=$?
            [[ $status == 125 && $attempt != 3 ]] || break
            echo "arm: $arch: $source: a child stuck in qemu-user (see above); running it again"
            mv "$logs/$arch-$name.log" "$logs/$arch-$name.stuck-$attempt.log"
        done
        # Still stuck on the last attempt: a failure, whatever the tests said.
        [[ $status == 125 ]] && status=1
        line=$(grep -E '^test result: ' "$logs/$arch-$name.log" | tail -1)
        p=$(grep -Eo '[0-9]+ passed' <<<"$line" | grep -Eo '[0-9]+' || echo 0)
        f=$(grep -Eo '[0-9]+ failed' <<<"$line" | grep -Eo '[0-9]+' || echo 0)
        if [[ $status != 0 && ${f:-0} == 0 ]]; then
            f=1 # it could not run, or crashed before its summary
        fi
        total_p=$((total_p + ${p:-0})) total_f=$((total_f + ${f:-0}))
        echo "$arch: $source: ${p:-0} passed, ${f:-0} failed"
        if [[ $status != 0 ]]; then
            sed -n '/^failures:$/,$p' "$logs/$arch-$name.log" | head -80
            [[ -z $line ]] && tail -20 "$logs/$arch-$name.log"
        fi
    done < <(executables "$triple")
    echo "$total_p $total_f" >>"$logs/$arch.count"
}

if [[ $build_ok == yes ]]; then
    say "running the tests under qemu-user $qemu_version: ${arches[*]}"
    run_started=$SECONDS
    if [[ ${#arches[@]} == 2 ]]; then
        # One architecture's host tests beside the other's pure ones, then
        # the other way round: never two host test binaries at once.
        a64=aarch64-unknown-linux-gnu a32=armv7-unknown-linux-gnueabihf
        run_tests $a64 arm64 host >>"$logs/arm64.out" &
        run_tests $a32 armhf pure >>"$logs/armhf.out" &
        wait
        run_tests $a32 armhf host >>"$logs/armhf.out" &
        run_tests $a64 arm64 pure >>"$logs/arm64.out" &
        wait
    else
        arch=${arches[0]}
        run_tests "$(triple_of "$arch")" "$arch" host >>"$logs/$arch.host.out" &
        run_tests "$(triple_of "$arch")" "$arch" pure >>"$logs/$arch.pure.out" &
        wait
        cat "$logs/$arch.host.out" "$logs/$arch.pure.out" >"$logs/$arch.out"
    fi
    run_seconds=$((SECONDS - run_started))
    for arch in "${arches[@]}"; do
        cat "$logs/$arch.out"
    done
    for arch in "${arches[@]}"; do
        # The watchdog's count: each restart is a child that qemu-user left
        # stuck before its exec.
        stuck=$(grep -c 'a child stuck in qemu-user' "$logs/$arch.out")
        echo "$arch: qemu-user $qemu_version's fork deadlock: $stuck test binaries stopped and run again"
    done
    for arch in "${arches[@]}"; do
        read -r p f < <(awk '{p += $1; f += $2; n++} END {print p + 0, f + (n == 2 ? 0 : 1)}' "$logs/$arch.count" 2>/dev/null) || { p=0 f=1; }
        if [[ $p == 0 ]]; then
            f=$((f + 1)) # no test ran: that is a failure, not a pass
        fi
        echo "$arch: $p passed, $f failed"
        passed=$((passed + p)) failed=$((failed + f))
    done
    echo "arm: tests ran in $run_seconds s, the build took $build_seconds s, $((SECONDS - started)) s in all"
else
    echo "arm: the tests were not built, so none ran"
    failed=$((failed + 1))
fi

for entry in "${not_under_qemu[@]}"; do
    echo "arm: not run under qemu-user (both architectures): ${entry%%: *}: ${entry#*: }"
done
[[ ${#not_under_qemu[@]} == 0 ]] && echo "arm: every test ran under qemu-user; none is left out"
echo "arm: $passed passed, $failed failed"
[[ $failed == 0 && $passed -gt 0 ]]
