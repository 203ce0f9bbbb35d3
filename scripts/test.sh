#!/usr/bin/env bash
# Every test of pimigrate. On a fresh Debian or Ubuntu machine it installs
# what it needs, then runs, each as a timed phase:
#   1. formatting and lints: cargo fmt --check, cargo clippy -D warnings
#   2. cargo test for the workspace: unit tests, the fixture machines, and
#      the live tests on loop devices and real ext4 (these need root)
#   3. the Debian packages, built and inspected (scripts/check-deb.sh): this
#      machine's, arm64 and armhf (cross-built against glibc 2.31)
#   4. the crate's tests on aarch64 and armv7 under qemu-user, built with
#      Cargo.toml's rust-version (scripts/test-arm.sh)
#   5. the emulated Raspberry Pi testbed (QEMU) scenarios: the x86 guest's and
#      the ARM lane's (raspi3b, raspi4b: docs/testbed/arm.md)
# in this order: the testbed's speed scenarios first, the only guests on
# the machine, while the builds of steps 1 to 4 compile beside them at the
# lowest CPU and I/O priority and step 4's tests run after those builds;
# then steps 1 to 3, with the scenarios that time nothing running beside
# them.
#
#   sudo ./scripts/test.sh                 everything (what CI runs)
#   sudo ./scripts/test.sh --quick         lints, cargo tests and one boot
#                                          scenario: the loop while developing
#   sudo ./scripts/test.sh --no-testbed    steps 1 to 4 only
#
# It ends with a time table, every phase and every testbed scenario with
# its wall and CPU seconds (also kept in target/test-times.tsv, from which
# scripts/times-doc.sh rewrites docs/testbed/times.md), and the
# line that counts every test: `all tests: N passed, N failed`.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

mode=all
for arg in "$@"; do
    case $arg in
        --quick) mode=quick ;;
        --no-testbed) mode=no-testbed ;;
        *) die "unknown option $arg (see the comment at the top of $0)" ;;
    esac
done

if [[ $(id -u) != 0 ]]; then
    [[ ${CI:-} == true ]] && die "CI must run the tests as root (loop devices, mounts)"
    die "run as root: sudo $0 $*"
fi

# A CI machine's disk can be small: the incremental caches and full
# debuginfo would double the debug build (about 2.3 GB to about 1 GB
# without them), and the testbed needs its room for disk images.
if [[ ${CI:-} == true ]]; then
    export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only
    # CI keeps cargo's build outputs between runs, outside the checkout,
    # as it keeps the ARM builds' (scripts/lib.sh) and as CI systems cache
    # target/: in a fresh clone every dependency would be compiled three
    # times over (clippy, the debug tests, the release build), about 9 of
    # the 2-core machine's CPU minutes. Cargo still rebuilds all that
    # changed, and the workspace's own crates every time (a fresh clone's
    # files are newer than their outputs).
    if [[ -z ${CARGO_TARGET_DIR:-} ]]; then
        export CARGO_TARGET_DIR=$build_cache/host-target
        prune_build_outputs "$CARGO_TARGET_DIR"
    fi
fi

target_dir=${CARGO_TARGET_DIR:-$PWD/target}
mkdir -p "$target_dir"
# One row a phase: name, wall seconds, ok/FAILED, CPU seconds. The testbed
# adds a row per scenario (PI_TESTBED_TIMES), whose CPU seconds are its
# guests' (QEMU's).
times=$target_dir/test-times.tsv
printf '# %s, commit %s, %s cores, %s, CI=%s\n' "$(date -u '+%F %H:%M UTC')" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$(nproc)" \
    "${*:-all phases}" "${CI:-false}" >"$times"
export PI_TESTBED_TIMES=$times
run_started=$SECONDS

passed=0 failed=0
logs=$(mktemp -d)

# late_reports: CI stops a run after 90 minutes and keeps only the end of
# its output, where the untimed lane's lines crowd out the steps that run
# silently into log files beside it (the early builds, the ARM tests). So
# a run still going at 80 and at 85 minutes says what each of its
# processes is doing and how far each step's log got.
late_reports() {
    local at now sleeper=
    # Stopped (the run ended), it stops its sleep too: nothing of the run
    # may outlive it.
    trap 'kill $sleeper 2>/dev/null; exit 0' TERM
    for at in ${PIMIGRATE_TEST_LATE_REPORTS:-4800 5100}; do
        now=$((SECONDS - run_started))
        if ((at > now)); then
            sleep $((at - now)) </dev/null >/dev/null 2>&1 &
            sleeper=$!
            wait "$sleeper"
        fi
        {
            echo
            echo "==> the run is still going after $(((SECONDS - run_started) / 60)) minutes; what runs (seconds since it started, CPU time):"
            descendants $$ | head -40
            for log in "$logs"/*; do
                [[ -f $log && $log != */times.* ]] || continue
                echo "--- the end of ${log##*/}:"
                tail -3 "$log" | cut -c1-200
            done
            echo
        } >&2
    done
}
descendants() {
    local child
    for child in $(pgrep -P "$1"); do
        ps -o etimes=,time=,args= -p "$child" | cut -c1-160
        descendants "$child"
    done
}
late_reports &
late_pid=$!
trap 'kill "$late_pid" 2>/dev/null; rm -rf "$logs"' EXIT

# cpu_now: sets $cpu to the CPU seconds (user and system) this shell's
# finished children used so far. `times` must run in this shell, not in a
# command substitution: a forked shell starts its children's count at 0.
cpu_now() {
    # $BASHPID here, not in the awk's subshell, which has its own.
    local file=$logs/times.$BASHPID
    times >"$file"
    cpu=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] }
        printf "%d\n", s }' "$file")
}

# The steps running in the background, PID -> the names of their phase
# rows ("|" between them). Bash adds a background job's CPU seconds to this
# shell's count of its children's when the job ends, so a phase during
# which one ended takes them off again (they are in the job's own rows).
declare -A background=()

# background_cpu NAMES: the CPU seconds of the rows named (NAMES as above).
background_cpu() {
    awk -F'\t' -v names="$1" 'BEGIN { n = split(names, want, "|"); for (i = 1; i <= n; i++) is[want[i]] = 1 }
        ($1 in is) { s += $4 } END { print s + 0 }' "$times"
}

# phase NAME COMMAND...: runs a step, recording its wall seconds, outcome
# and CPU seconds: on a shared 2-core machine a step can take longer only
# because its neighbours were busy; the CPU column shows which one grew.
phase() {
    local name=$1 started=$SECONDS status cpu cpu_before pid running=()
    shift
    say "$name"
    for pid in "${!background[@]}"; do
        kill -0 "$pid" 2>/dev/null && running+=("$pid")
    done
    cpu_now
    cpu_before=$cpu
    "$@"
    status=$?
    cpu_now
    for pid in "${running[@]}"; do
        kill -0 "$pid" 2>/dev/null || cpu=$((cpu - $(background_cpu "${background[$pid]}")))
    done
    printf '%s\t%s\t%s\t%s\n' "$name" $((SECONDS - started)) \
        "$([[ $status == 0 ]] && echo ok || echo FAILED)" $((cpu - cpu_before)) >>"$times"
    return "$status"
}

# count_cargo_results LOG: adds cargo test's "test result" lines.
count_cargo_results() {
    local p f
    p=$(grep -Eo '^test result: .* ([0-9]+) passed' "$1" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
    f=$(grep -Eo '^test result: .*; ([0-9]+) failed' "$1" | grep -Eo '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
    passed=$((passed + p)) failed=$((failed + f))
}

# count_summary PREFIX STATUS LOG: adds the "PREFIX: N passed, N failed"
# line of a step's output; a step that failed without saying so (it could
# not start) counts as one failure.
count_summary() {
    local prefix=$1 status=$2 line
    line=$(grep -E "^$prefix: [0-9]+ passed, [0-9]+ failed" "$3" | tail -1)
    if [[ -n $line ]]; then
        passed=$((passed + $(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line")))
        failed=$((failed + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")))
    fi
    if [[ $status != 0 && ( -z $line || $line == *" 0 failed" ) ]]; then
        failed=$((failed + 1))
    fi
}

# Every host package of every step, installed here, before steps run side
# by side: two apt-get at once would fail on dpkg's lock.
setup() {
    ensure_build_tools || return
    # A subshell: these helpers exit on what they cannot install, and the
    # run must still end with its time table and summary.
    (
        set -e
        ensure_packages mkfs.ext4=e2fsprogs losetup=mount mkfs.vfat=dosfstools mcopy=mtools sfdisk=fdisk \
            rsync=rsync setfacl=acl getfattr=attr setcap=libcap2-bin fio=fio tmux=tmux groff=groff-base \
            objdump=binutils debootstrap=debootstrap unshare=util-linux python3=python3 lspci=pciutils \
            mkfs.btrfs=btrfs-progs
        [[ $mode == quick ]] || ensure_qemu_user
        [[ $mode == no-testbed ]] || testbed/run.sh --packages
    )
}

lints() {
    local status=0
    if ! cargo fmt --all --check; then
        echo "cargo fmt found unformatted code (run: cargo fmt --all)"
        failed=$((failed + 1)) status=1
    fi
    if ! cargo clippy --workspace --all-targets --locked -- -D warnings; then
        failed=$((failed + 1)) status=1
    fi
    return "$status"
}

cargo_tests() {
    local status log=$logs/cargo
    cargo test --workspace --locked 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    count_cargo_results "$log"
    if [[ $status != 0 ]] && ! grep -q '^test result: FAILED' "$log"; then
        echo "cargo test failed before running all tests (exit $status)"
        failed=$((failed + 1))
    fi
    return "$status"
}

# debian_package [--arch ARCH]: builds and checks one package.
debian_package() {
    local status log=$logs/deb${2:-}
    scripts/check-deb.sh "$@" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    count_summary deb "$status" "$log"
    return "$status"
}

arm_tests() {
    local status log=$logs/arm
    scripts/test-arm.sh 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    count_summary arm "$status" "$log"
    return "$status"
}

# arm_tests_beside: step 4 in the background job of the early builds, whose counters this shell cannot see: it leaves its output in
# $logs/arm and its exit status in $logs/arm.status for count_arm_beside.
arm_tests_beside() {
    lowest_until_speed_done scripts/test-arm.sh >"$logs/arm" 2>&1
    echo $? >"$logs/arm.status"
    return "$(cat "$logs/arm.status")"
}
count_arm_beside() {
    count_summary arm "$(cat "$logs/arm.status" 2>/dev/null || echo 1)" "$logs/arm"
}

# lowest_until_speed_done COMMAND...: runs it at nice 19 and I/O class idle
# while the speed scenarios run, at the normal priority once they are done
# ($logs/speed-done exists; speed_done raises what already runs). Beside
# the scenarios that time nothing nice 19 only starves the builds: their
# guests keep both cores busy, and on CI's machine the builds, then the
# ARM tests and steps 1 to 3 behind them, ended 20 minutes after the lane
# they ran beside (2823 s of wall time for 1192 CPU s).
lowest_until_speed_done() {
    if [[ -e $logs/speed-done ]]; then
        "$@"
    else
        nice -n 19 ionice -c 3 "$@"
    fi
}

# speed_done PID: the speed scenarios are over; PID (the job of the early
# builds) and every process under it get the normal CPU and I/O priority
# back. Thread by thread: on Linux a nice value belongs to a thread, and
# rustc and cargo run several.
speed_done() {
    touch "$logs/speed-done"
    raise_priority "$1"
}
raise_priority() {
    local task child
    for task in /proc/"$1"/task/*; do
        renice -n 0 -p "${task##*/}" >/dev/null 2>&1
        ionice -c 2 -n 4 -p "${task##*/}" >/dev/null 2>&1
    done
    for child in $(pgrep -P "$1"); do
        raise_priority "$child"
    done
}

# Step 3.
packages() {
    phase "Debian package: scripts/check-deb.sh" debian_package
    phase "Debian package for arm64: scripts/check-deb.sh --arch arm64" debian_package --arch arm64
    phase "Debian package for armhf: scripts/check-deb.sh --arch armhf" debian_package --arch armhf
}
ARM_TESTS="ARM tests: scripts/test-arm.sh (aarch64, armv7 under qemu-user)"

# Steps 3 and 4.
packages_and_arm() {
    packages
    phase "$ARM_TESTS" arm_tests
}

# early_builds LOG: compiles what steps 1 to 4 build (the arm64 and armhf
# binaries, the ARM tests, then this machine's lints and tests) into their
# caches, so that those steps later find them built. It runs beside the
# speed scenarios other than recommend at nice 19 and I/O class idle: a
# speed scenario's guest uses under one of the two cores on average, and
# the compilers take only the time it leaves (docs/testbed/README.md, "Two
# lanes"); what is left when they end runs at the normal priority
# (lowest_until_speed_done). Not SCHED_IDLE: a rustc got 8 s of CPU in 7
# minutes under it beside the untimed lane's guests. Nothing here is counted as a
# test: a build that fails here fails again in its own step, which says so.
early_builds() {
    local log=$1 arch status=0
    # low WHAT COMMAND...: one build, a row of its own in the time table
    # (indented under this phase's, which follows it): on a machine with
    # empty caches this job makes the build chroot, the cross toolchains
    # and the ARM image too, and its rows show which of them took the time.
    low() {
        local what=$1 started=$SECONDS result=ok
        shift
        echo "==> early build: $what ($(date -u +%T))" >>"$log"
        lowest_until_speed_done "$@" >>"$log" 2>&1 || { status=1 result=FAILED; }
        printf '    early build: %s\t%s\t%s\t-\n' "$what" $((SECONDS - started)) "$result" >>"$times"
    }
    for arch in arm64 armhf; do
        low "$arch binary (and the build chroot)" scripts/build-deb.sh --arch "$arch" --binary-only
    done
    low "ARM test binaries" scripts/test-arm.sh --build-only
    # The ARM lane's guest image (a few minutes under qemu-user when its
    # recipe changed, nothing when cached), so that the untimed lane finds
    # it made instead of building it at its start.
    low "ARM lane image" testbed/image-arm64/build-image.sh
    # This machine's builds last: the testbed's own cargo build at the
    # start of the speed lane must not wait for cargo's lock.
    low "clippy" cargo clippy --workspace --all-targets --locked -- -D warnings
    low "host test binaries" cargo test --workspace --locked --no-run
    if [[ $status != 0 ]]; then
        tail -20 "$log"
        echo "(a build failed here; its step builds it again and reports)"
    fi
    return "$status"
}

# testbed LOG [ARG...]: the emulated Pi (testbed/run.sh ARG...); it adds its
# own rows (the image, each scenario) to the time table. Counted by
# count_testbed LOG STATUS afterwards, since it may run in the background.
testbed() {
    local log=$1
    shift
    testbed/run.sh "$@" 2>&1 | tee "$log"
    return "${PIPESTATUS[0]}"
}
count_testbed() {
    count_summary testbed "$2" "$1"
}

# The table of every phase and scenario.
time_table() {
    local cpu
    cpu_now
    printf '%s\t%s\t%s\t%s\n' "whole run" $((SECONDS - run_started)) \
        "$([[ $failed == 0 ]] && echo ok || echo FAILED)" "$cpu" >>"$times"
    echo
    echo "time table (scenarios marked * ran beside another; $times)"
    printf '  %-58s %6s %6s\n' "" "wall s" "CPU s"
    grep -v '^#' "$times" | awk -F'\t' '{ printf "  %-58s %6s %6s  %s\n", $1, $2, ($4 == "" ? "-" : $4), $3 }'
}

# Steps 1 and 2.
lints_and_cargo_tests() {
    phase "lints: cargo fmt, cargo clippy" lints
    phase "cargo tests: unit, fixture machines, live loop devices" cargo_tests
}

if ! phase "setup: packages and toolchain" setup; then
    failed=$((failed + 1))
else
    case $mode in
        all)
            # The speed scenarios first, the only guests, with the builds
            # of steps 1 to 4 beside them at the lowest priority: they
            # leave most of a core unused. Then the scenarios that time
            # nothing only need the machine's spare time (each guest waits
            # on its emulated disks much of it), so they run in the
            # background while steps 1 to 4 run.
            # Step 4's runs follow the builds in the same job: the builds
            # end minutes before the speed scenarios do, and that time was
            # otherwise left to the one guest. Steps 1 and 2 start only
            # after step 4: their tests and the ARM ones both use loop
            # devices and mounts, and never run at once.
            # recommend first, with nothing beside it: its flash drive's
            # random writes must measure their 50 a second within 15 %,
            # and beside the builds, even under SCHED_IDLE, they fell to
            # 41.7 (docs/testbed/README.md, "Two lanes").
            phase "testbed: recommend, the only work on the machine (wall time)" \
                testbed "$logs/recommend" recommend
            count_testbed "$logs/recommend" $?
            {
                phase "builds of steps 1 to 4 (nice 19 beside the speed scenarios)" \
                    early_builds "$logs/early-builds"
                phase "$ARM_TESTS (after those builds)" \
                    arm_tests_beside
            } &
            early=$!
            background[$early]="builds of steps 1 to 4 (nice 19 beside the speed scenarios)|$ARM_TESTS (after those builds)"
            PI_TESTBED_SKIP=recommend \
                phase "testbed: speed scenarios, the only guests (wall time)" testbed "$logs/alone" --lane alone
            count_testbed "$logs/alone" $?
            speed_done "$early"
            # Two guests at a time beside steps 1 to 4, three once those
            # are done: two guests alone leave part of the machine idle.
            # (The lane's cargo build waits for the builds' lock if they
            # still run.)
            PI_TESTBED_EXTRA_JOB_AFTER=$logs/steps-done \
                phase "testbed: scenarios that time nothing (wall time, beside steps 1 to 4)" \
                testbed "$logs/shared" --lane shared &
            shared=$!
            background[$shared]="testbed: scenarios that time nothing (wall time, beside steps 1 to 4)"
            wait "$early"
            cat "$logs/arm"
            count_arm_beside
            lints_and_cargo_tests
            packages
            touch "$logs/steps-done"
            wait "$shared"
            count_testbed "$logs/shared" $?
            ;;
        quick)
            lints_and_cargo_tests
            phase "testbed: sd-boot (wall time)" testbed "$logs/quick" sd-boot
            count_testbed "$logs/quick" $?
            ;;
        no-testbed)
            lints_and_cargo_tests
            packages_and_arm
            ;;
    esac
fi

# What failed, in a few lines after the time table: CI keeps only the end
# of a run's output, and a scenario's own message is printed minutes
# before it.
failures() {
    local lines
    # Scenarios, cargo tests (the host's "test ... FAILED" lines, and the
    # "---- NAME stdout ----" headers that test-arm.sh's summaries keep),
    # and the steps' own summaries that count a failure.
    lines=$(cat "$logs"/* 2>/dev/null | grep -aE \
        '^testbed: (FAIL|SETUP FAILED)|^test .* \.\.\. FAILED$|^---- .* stdout ----$|^(deb|arm): FAIL|^(arm64|armhf): .* [1-9][0-9]* failed$' |
        cut -c1-2000)
    [[ -n $lines ]] || return 0
    echo
    echo "what failed:"
    sed 's/^/  /' <<<"$lines"
}

time_table
failures
echo
echo "all tests: $passed passed, $failed failed"
[[ $failed == 0 && $passed -gt 0 ]]
