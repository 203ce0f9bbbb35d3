#!/usr/bin/env bash
# Benchmarks pimigrate's tree copier against rsync and cp on the same trees,
# between two loop-backed ext4 filesystems, caches dropped before each run:
#   root   a root-filesystem-like tree: this machine's /usr, /etc and /var/lib
#   large  a few large files of random data (holes are left to the tests:
#          rsync without -S would write them out and skew the ratio)
#   debian a debootstrap'd Debian 12 root filesystem: the testbed's guest
#          image (testbed/image/build-image.sh, built if not cached)
# For each tree and tool it runs RUNS copies into a freshly made ext4 and
# prints median seconds, MB/s, files/s, the ratio to rsync and cp, and peak
# RSS. pimigrate's copy is checked with rsync -naHAX once per tree.
#
#   sudo scripts/bench-copy.sh [--runs N] [--threads N] [--trees "root large debian"] [--rebuild] [--clean]
#
# Defaults: --runs 3, all three trees, the copier's default threads (4).
# docs/copy.md says which settings each of its figures came from.
#
# Disk space: the images stay in $BENCH_DIR (default
# /var/tmp/pimigrate-bench-copy) for the next run, which then skips
# building the trees: two sparse 12 GiB files, source.img (the three trees,
# about 7 GiB) and target.img (the last copy); about 8 GiB in all after a
# default run here. --rebuild makes them anew; --clean removes $BENCH_DIR
# when the run ends (`sudo rm -rf /var/tmp/pimigrate-bench-copy` does the
# same by hand, with nothing mounted from it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

runs=3 threads= rebuild=no clean=no trees="root large debian"
while [[ $# -gt 0 ]]; do
    case $1 in
        --runs) runs=$2; shift ;;
        --threads) threads=$2; shift ;;
        --rebuild) rebuild=yes ;;
        --clean) clean=yes ;;
        --trees) trees=$2; shift ;;
        *) die "unknown option $1 (see the comment at the top of $0)" ;;
    esac
    shift
done
[[ $(id -u) == 0 ]] || die "run as root: sudo $0 (loop devices, mounts, dropping caches)"
ensure_build_tools
ensure_packages rsync=rsync mkfs.ext4=e2fsprogs losetup=mount jq=jq sfdisk=fdisk

work=${BENCH_DIR:-/var/tmp/pimigrate-bench-copy}
mkdir -p "$work"
say "building the copier"
cargo build --release --quiet --example copy-tree --bin pimigrate
copier=${CARGO_TARGET_DIR:-$PWD/target}/release/examples/copy-tree
pimigrate=${CARGO_TARGET_DIR:-$PWD/target}/release/pimigrate

# On exit, every filesystem mounted under the work folder is unmounted,
# deepest first, and the images' loop devices detached. Found with findmnt
# rather than remembered: `measure` runs in a subshell (a process
# substitution), and what it mounts is not in any variable of this shell.
# Images are deleted only by --rebuild, and never while mounted.
cleanup() {
    local mnt
    while read -r mnt; do
        umount "$mnt" || echo "could not unmount $mnt" >&2
    done < <(findmnt -rn -o TARGET | grep -F "$work/" | sort -r)
    losetup -j "$work/source.img" -O NAME -n 2>/dev/null | xargs -r -n1 losetup -d
    losetup -j "$work/target.img" -O NAME -n 2>/dev/null | xargs -r -n1 losetup -d
    if [[ -n ${debian_loop:-} ]]; then losetup -d "$debian_loop" 2>/dev/null || true; fi
    # Only once nothing is mounted from it: rm must never reach through a
    # mount into a filesystem still attached.
    if [[ $clean == yes ]]; then
        if findmnt -rn -o TARGET | grep -qF "$work/"; then
            echo "not removing $work: something is still mounted there" >&2
        else
            rm -rf "$work"
            echo "removed $work"
        fi
    fi
}
trap cleanup EXIT

# attach IMAGE MOUNTPOINT [LOSETUP-OPTION...]: loop device for IMAGE,
# mounted at MOUNTPOINT.
attach() {
    local device
    device=$(losetup -f --show "${@:3}" "$1")
    mkdir -p "$2"
    mount "$device" "$2"
}

detach() {
    local device
    device=$(findmnt -n -o SOURCE "$1")
    umount "$1"
    # The kernel may have released the loop device with the mount already.
    losetup -d "$device" 2>/dev/null || ! losetup "$device" >/dev/null 2>&1 ||
        die "could not detach $device"
}

src=$work/src dst=$work/dst
if [[ $rebuild == yes || ! -e $work/source-v2.ready ]]; then
    say "building the source trees (once)"
    rm -f "$work/source-v2.ready" "$work/debian.ready" "$work/source.img"
    truncate -s 12G "$work/source.img"
    mkfs.ext4 -q -F "$work/source.img"
    attach "$work/source.img" "$src"
    mkdir -p "$src/root" "$src/large"
    for dir in /usr /etc /var/lib; do
        mkdir -p "$src/root$(dirname "$dir")"
        cp -a --one-file-system "$dir" "$src/root$(dirname "$dir")/"
    done
    for i in 1 2 3 4; do
        head -c $((384 << 20)) /dev/urandom >"$src/large/random-$i"
    done
    sync
    detach "$src"
    touch "$work/source-v2.ready"
fi
attach "$work/source.img" "$src"
if [[ " $trees " == *" debian "* && ! -e $work/debian.ready ]]; then
    say "adding the debootstrap'd Debian root (the testbed's image)"
    images=$(testbed/image/build-image.sh | tail -1)
    # Partition 2 of the SD card image is the root filesystem.
    start=$(sfdisk -J "$images/sd-bookworm.img" | jq '.partitiontable.partitions[1].start * 512')
    debian_loop=$(losetup -f --show -r -o "$start" "$images/sd-bookworm.img")
    mkdir -p "$work/debian-image"
    mount -o ro "$debian_loop" "$work/debian-image"
    rm -rf "$src/debian"
    cp -a --one-file-system "$work/debian-image" "$src/debian"
    detach "$work/debian-image"
    debian_loop=
    sync
    touch "$work/debian.ready"
fi
[[ -e $work/target.img ]] || truncate -s 12G "$work/target.img"

# fresh_target: a new, empty ext4 at $dst for each run ($target_loop_options
# for the loop device).
target_loop_options=()
fresh_target() {
    mountpoint -q "$dst" && detach "$dst"
    mkfs.ext4 -q -F "$work/target.img"
    attach "$work/target.img" "$dst" "${target_loop_options[@]}"
}

# measure TOOL TREE [FROM]: one run copying FROM/TREE (FROM defaults to
# the source filesystem); prints "seconds peak-rss-kib".
measure() {
    local tool=$1 tree=$2 from=${3:-$src} cmd
    case $tool in
        pimigrate) cmd=("$copier" ${threads:+--threads "$threads"} "$from/$tree/" "$dst/$tree") ;;
        rsync) cmd=(rsync -aHAXx --numeric-ids "$from/$tree/" "$dst/$tree/") ;;
        cp) cmd=(cp -a "$from/$tree" "$dst/$tree") ;;
    esac
    fresh_target
    sync
    echo 3 >/proc/sys/vm/drop_caches
    # The copy ends with the data in the page cache; the sync is part of the
    # cost of a copy that is meant to be on disk.
    /usr/bin/time -f '%e %M' -o "$work/time.txt" bash -c '"$@" >/dev/null && sync' _ "${cmd[@]}"
    cat "$work/time.txt"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

results=$work/results.txt
: >"$results"
for tree in $trees; do
    bytes=$(du -s --block-size=1 --apparent-size "$src/$tree" | cut -f1)
    entries=$(find "$src/$tree" | wc -l)
    say "tree $tree: $((bytes >> 20)) MiB, $entries entries"
    # Runs alternate between the tools (pimigrate, rsync, cp, pimigrate,
    # ...), so a change in the machine's load during the benchmark touches
    # every tool alike and the ratios stay fair.
    for tool in pimigrate rsync cp; do : >"$work/runs-$tool.txt"; done
    # One untimed read of the whole tree first: dropping the caches here
    # does not reach the host's cache of the image file, so without it the
    # first tool to run pays for reading the image cold (43 s instead of
    # 26 s for pimigrate's first root copy, measured).
    tar -C "$src/$tree" -cf - . | cat >/dev/null
    for ((run = 1; run <= runs; run++)); do
        for tool in pimigrate rsync cp; do
            read -r seconds rss < <(measure "$tool" "$tree")
            echo "$seconds $rss" >>"$work/runs-$tool.txt"
            printf '  %-9s run %d: %6.2f s, peak RSS %d MiB\n' "$tool" "$run" "$seconds" $((rss / 1024))
            if [[ $tool == pimigrate && $run == 1 ]]; then
                differences=$(rsync -naHAXx --numeric-ids --itemize-changes "$src/$tree/" "$dst/$tree/" | wc -l)
                [[ $differences == 0 ]] || die "pimigrate's copy of $tree differs from the source in $differences entries"
                echo "  pimigrate's copy checked: rsync -naHAX finds nothing to do"
            fi
        done
    done
    for tool in pimigrate rsync cp; do
        seconds=$(cut -d' ' -f1 "$work/runs-$tool.txt" | median)
        rss=$(cut -d' ' -f2 "$work/runs-$tool.txt" | sort -n | tail -1)
        echo "$tree $tool $seconds $rss $bytes $entries" >>"$results"
    done
done

say "results ($(date -u +%Y-%m-%d), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), median of $runs runs)"
awk '
    { tree[NR]=$1; tool[NR]=$2; s[NR]=$3; rss[NR]=$4; bytes[NR]=$5; n[NR]=$6; at[$1 " " $2]=$3 }
    END {
        printf "| %-5s | %-9s | %8s | %8s | %9s | %9s | %9s | %13s |\n", "tree", "tool", "seconds", "MB/s", "files/s", "vs rsync", "vs cp", "peak RSS MiB"
        printf "|-------|-----------|----------|----------|-----------|-----------|-----------|---------------|\n"
        for (i = 1; i <= NR; i++) {
            printf "| %-5s | %-9s | %8.2f | %8.1f | %9.0f | %8.2fx | %8.2fx | %13.1f |\n",
                tree[i], tool[i], s[i], bytes[i] / 1e6 / s[i], n[i] / s[i],
                at[tree[i] " rsync"] / s[i], at[tree[i] " cp"] / s[i], rss[i] / 1024
        }
    }' "$results"

# Large files against the target itself: the copier's throughput as a share
# of what the same fresh ext4 takes in sequential 1 MiB writes (pimigrate
# bench, SEQ1M, O_DIRECT, flush included). The loop device reads and writes
# its backing file with direct I/O here: through the host's page cache, the
# benchmark's O_DIRECT writes would measure memory, not the disk. The source
# files are read from a tmpfs: on a Pi the SD card and the SSD are separate
# devices, while here both images share one virtual disk, whose reads would
# take from the writes' bandwidth what a second device would not.
if [[ " $trees " == *" large "* ]]; then
    ram=$work/ram
    mkdir -p "$ram"
    mount -t tmpfs -o size=2G tmpfs "$ram"
    cp -a "$src/large" "$ram/large"
    target_loop_options=(--direct-io=on)
    : >"$work/runs-ram.txt"
    for ((run = 1; run <= runs; run++)); do
        measure pimigrate large "$ram" | cut -d' ' -f1 >>"$work/runs-ram.txt"
    done
    seconds=$(median <"$work/runs-ram.txt")
    bytes=$(du -s --block-size=1 --apparent-size "$ram/large" | cut -f1)
    fresh_target
    seq_write=$("$pimigrate" bench "$dst" --quick --json 2>/dev/null |
        jq -r '[.results[] | select(.pattern == "sequential" and .direction == "write")] | max_by(.mb_per_s) | .mb_per_s')
    awk -v b="$bytes" -v s="$seconds" -v w="$seq_write" -v n="$runs" 'BEGIN {
        c = b / 1e6 / s
        printf "large files from a tmpfs to a loop device with direct I/O (median of %d): the copy at %.1f MB/s is %.0f %% of the target'"'"'s sequential write, %.1f MB/s (pimigrate bench --quick)\n", n, c, 100 * c / w, w }'
fi
