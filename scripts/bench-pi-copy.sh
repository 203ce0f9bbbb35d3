#!/usr/bin/env bash
# Benchmarks pimigrate's root copy against rsync on the emulated Pi, side
# by side in one boot: the testbed's benchmark `pi-copy-bench` (not in the
# suite: scripts/test.sh never runs it) boots the x86 guest, the testbed's
# Pi 4, with its SD card and a blank USB SSD, and on the same tree, the
# guest's root, runs RUNS times each, the guest's caches dropped before
# every run, the three taking turns:
#   migrate  pimigrate migrate --table mbr --no-trial (root-only): the copy
#            step of its output, both passes and the flush, then rollback
#   sync     pimigrate sync --target <ssd> --erase --layout root-only: its copy
#            step and its flush step
#   rsync    rsync -aHAXx --numeric-ids from a read-only bind mount of /
#            (pimigrate's default exclusions) onto a fresh ext4 of the same
#            SSD, then sync -f of it, as pimigrate flushes its copy
# Medians, rsync's time over each of pimigrate's (the goal is 1.3x), where
# the guest's CPUs spent the copy, and what each copy holds are printed;
# --write-docs puts the table into docs/internals/sync.md between its bench-pi-copy
# markers.
#
#   sudo flock /tmp/pimigrate-testbed.lock scripts/bench-pi-copy.sh [--runs N]
#       [--pimigrate BIN | --worktree DIR [--target-dir DIR]]
#       [--profile strace|perf] [--write-docs]
#
# --pimigrate BIN: the guest runs this x86_64 build of pimigrate instead of
# this worktree's. --worktree DIR: builds pimigrate (release) in that
# worktree, into --target-dir (default DIR/target), and measures it.
# --profile: one more run of each copy under the host's strace (-f -c: every
# syscall of every thread, counted and timed) or perf (the whole guest
# sampled on the CPU clock), their reports beside the table in the log
# folder. The testbed's lock keeps other scenarios' guests off the machine
# while it measures; other work on the host is measured and printed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

runs=3 pimigrate= worktree= worktree_target= profile= write_docs=no
while [[ $# -gt 0 ]]; do
    case $1 in
        --runs) runs=$2; shift ;;
        --pimigrate) pimigrate=$2; shift ;;
        --worktree) worktree=$2; shift ;;
        --target-dir) worktree_target=$2; shift ;;
        --profile) profile=$2; shift ;;
        --write-docs) write_docs=yes ;;
        *) die "unknown option $1 (see the comment at the top of $0)" ;;
    esac
    shift
done
[[ $(id -u) == 0 ]] || die "run as root: sudo $0 (the testbed needs it)"
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs takes a number from 1 up, not $runs"
[[ -z $pimigrate || -z $worktree ]] || die "--pimigrate and --worktree exclude each other"
case $profile in
    "" | strace | perf) ;;
    *) die "--profile takes strace or perf, not $profile" ;;
esac
[[ -z $profile || -x /usr/bin/$profile ]] ||
    die "--profile $profile: the host has no /usr/bin/$profile (apt-get install ${profile/perf/linux-perf})"

if [[ -n $worktree ]]; then
    [[ -f $worktree/Cargo.toml ]] || die "$worktree is not a pimigrate worktree"
    worktree=$(cd "$worktree" && pwd)
    worktree_target=${worktree_target:-$worktree/target}
    say "building pimigrate in $worktree (target dir $worktree_target)"
    (cd "$worktree" && CARGO_TARGET_DIR=$worktree_target nice -n 10 cargo build --release -q -p pimigrate --bin pimigrate) ||
        die "cargo build in $worktree failed"
    pimigrate=$worktree_target/release/pimigrate
fi
if [[ -n $pimigrate ]]; then
    [[ -x $pimigrate ]] || die "$pimigrate is not an executable"
    pimigrate=$(cd "$(dirname "$pimigrate")" && pwd)/$(basename "$pimigrate")
    say "the guest runs $pimigrate ($("$pimigrate" --version))"
    export PI_TESTBED_PIMIGRATE=$pimigrate
fi

logs=${CARGO_TARGET_DIR:-$PWD/target}/testbed-logs/pi-copy-bench
rm -f "$logs/pi-copy-bench.md"
PI_TESTBED_BENCH_RUNS=$runs PI_TESTBED_BENCH_PROFILE=$profile testbed/run.sh pi-copy-bench ||
    die "the benchmark failed (its logs: $logs/)"
[[ -s $logs/pi-copy-bench.md ]] || die "the benchmark wrote no table in $logs/"

table=$(mktemp)
trap 'rm -f "$table"' EXIT
{
    echo "One run of \`scripts/bench-pi-copy.sh\` ($(date -u +%Y-%m-%d), host: $(nproc) CPUs, kernel $(uname -r)):"
    cat "$logs/pi-copy-bench.md"
} >"$table"
say "results (each run's stamped output and the table's rows: $logs/)"
cat "$table"
if [[ -n $profile ]]; then
    say "the $profile reports: $logs/profile-*.txt"
fi

if [[ $write_docs == yes ]]; then
    doc=docs/internals/sync.md
    grep -q '^<!-- bench-pi-copy:begin' "$doc" || die "$doc has no bench-pi-copy markers"
    awk -v table="$table" '
        /^<!-- bench-pi-copy:begin/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
        /^<!-- bench-pi-copy:end/ { skip = 0 }
        !skip { print }' "$doc" >"$doc.new"
    mv "$doc.new" "$doc"
    echo "bench-pi-copy: $doc updated"
fi
