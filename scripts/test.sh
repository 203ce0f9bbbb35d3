#!/usr/bin/env bash
# Every test of pimigrate. On a fresh Debian or Ubuntu machine it installs
# what it needs, then runs:
#   1. formatting and lints: cargo fmt --check, cargo clippy -D warnings
#   2. cargo test for the workspace: unit tests, the fixture machines, and
#      the live tests on loop devices and real ext4 (these need root)
#   3. the Debian package: built and inspected (scripts/check-deb.sh)
#   4. the emulated Raspberry Pi testbed (QEMU) scenarios
#
#   sudo ./scripts/test.sh                 everything
#   sudo ./scripts/test.sh --no-testbed    steps 1 to 3 only (a quicker loop)
#
# The last line counts every test: `all tests: N passed, N failed`.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

run_testbed=yes
for arg in "$@"; do
    case $arg in
        --no-testbed) run_testbed=no ;;
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
fi

ensure_build_tools
ensure_packages mkfs.ext4=e2fsprogs losetup=mount mkfs.vfat=dosfstools mcopy=mtools sfdisk=fdisk \
    rsync=rsync setfacl=acl getfattr=attr setcap=libcap2-bin fio=fio tmux=tmux groff=groff-base

passed=0 failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

count_cargo_results() {
    local p f
    p=$(grep -Eo '^test result: .* ([0-9]+) passed' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
    f=$(grep -Eo '^test result: .*; ([0-9]+) failed' "$log" | grep -Eo '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
    passed=$((passed + p)) failed=$((failed + f))
}

# count_summary PREFIX STATUS: adds the "PREFIX: N passed, N failed" line
# of a step's output in $log; a step that failed without saying so (it
# could not start) counts as one failure.
count_summary() {
    local prefix=$1 status=$2 line
    line=$(grep -E "^$prefix: [0-9]+ passed, [0-9]+ failed" "$log" | tail -1)
    if [[ -n $line ]]; then
        passed=$((passed + $(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line")))
        failed=$((failed + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")))
    fi
    if [[ $status != 0 && ( -z $line || $line == *" 0 failed" ) ]]; then
        failed=$((failed + 1))
    fi
}

say "formatting and lints"
if ! cargo fmt --all --check; then
    echo "cargo fmt found unformatted code (run: cargo fmt --all)"
    failed=$((failed + 1))
fi
if ! cargo clippy --workspace --all-targets --locked -- -D warnings; then
    failed=$((failed + 1))
fi

say "cargo test (unit, fixture machines, live loop devices)"
cargo test --workspace --locked 2>&1 | tee "$log"
cargo_status=${PIPESTATUS[0]}
count_cargo_results
if [[ $cargo_status != 0 ]] && ! grep -q '^test result: FAILED' "$log"; then
    echo "cargo test failed before running all tests (exit $cargo_status)"
    failed=$((failed + 1))
fi

say "the Debian package (scripts/check-deb.sh)"
scripts/check-deb.sh 2>&1 | tee "$log"
count_summary deb "${PIPESTATUS[0]}"

if [[ $run_testbed == yes ]]; then
    say "emulated Raspberry Pi testbed"
    testbed/run.sh 2>&1 | tee "$log"
    count_summary testbed "${PIPESTATUS[0]}"
fi

echo
echo "all tests: $passed passed, $failed failed"
[[ $failed == 0 && $passed -gt 0 ]]
