#!/usr/bin/env bash
# Benchmarks `pimigrate sync` against rsync on the same trees, side by side
# in one run: a root-filesystem-like tree (this machine's /usr, /etc and
# /var/lib, over 100,000 entries) on a loop-backed ext4 is the running
# system; pimigrate keeps a loop-device standby of it (its first sync lays
# the disk out and copies everything), rsync -aHAX --delete a plain ext4 of
# its own. Then, RUNS times each, caches dropped before every run, the two
# tools taking turns:
#   unchanged  nothing changed on the source
#   1%         1 % of the files changed: most appended to, some rewritten
#              with the same size and mtime (what rsync's quick check
#              misses), some chmod'ed only, some removed and as many added
#   checksum   (--checksum-runs, default 1) nothing changed, pimigrate sync
#              --checksum against rsync -aHAXc --delete
# After each run both copies are diffed with the source: rsync -naHAX
# --delete over the whole tree, and rsync -naHAXc over the files that round
# changed. pimigrate must miss nothing (the script fails otherwise); what
# rsync missed is counted and printed. The timed command includes the
# final `sync`. Medians and the ratios (rsync's time / pimigrate's) are
# printed; --write-docs puts the table into docs/internals/sync.md between its
# bench-sync markers.
#
#   sudo scripts/bench-sync.sh [--runs N] [--checksum-runs N] [--rebuild] [--clean] [--write-docs]
#
# Disk space: three sparse 12 GiB images in $BENCH_DIR (default
# /var/tmp/pimigrate-bench-sync), about 18 GiB used, kept for the next run;
# --clean removes them at the end, --rebuild makes them anew.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

runs=3 checksum_runs=1 rebuild=no clean=no write_docs=no
while [[ $# -gt 0 ]]; do
    case $1 in
        --runs) runs=$2; shift ;;
        --checksum-runs) checksum_runs=$2; shift ;;
        --rebuild) rebuild=yes ;;
        --clean) clean=yes ;;
        --write-docs) write_docs=yes ;;
        *) die "unknown option $1 (see the comment at the top of $0)" ;;
    esac
    shift
done
[[ $(id -u) == 0 ]] || die "run as root: sudo $0 (loop devices, mounts, dropping caches)"
ensure_build_tools
ensure_packages rsync=rsync mkfs.ext4=e2fsprogs losetup=mount sfdisk=fdisk jq=jq

work=${BENCH_DIR:-/var/tmp/pimigrate-bench-sync}
mkdir -p "$work"
say "building pimigrate"
cargo build --release --quiet --bin pimigrate
pimigrate=${CARGO_TARGET_DIR:-$PWD/target}/release/pimigrate

src=$work/src rs=$work/rsync state=$work/state
standby_loop=

# On exit: everything mounted under the work folder unmounted, deepest
# first, and the images' loop devices detached (found, not remembered).
cleanup() {
    local mnt image
    while read -r mnt; do
        umount "$mnt" || echo "could not unmount $mnt" >&2
    done < <(findmnt -rn -o TARGET | grep -F "$work/" | sort -r)
    for image in source rsync standby; do
        losetup -j "$work/$image.img" -O NAME -n 2>/dev/null | xargs -r -n1 losetup -d
    done
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

attach() { # IMAGE MOUNTPOINT
    local device
    device=$(losetup -f --show "$1")
    mkdir -p "$2"
    mount "$device" "$2"
}

if [[ $rebuild == yes || ! -e $work/ready-v1 ]]; then
    say "building the source tree and the two copies (once)"
    rm -rf "$state" "$work"/*.img "$work/ready-v1"
    truncate -s 12G "$work/source.img" "$work/rsync.img" "$work/standby.img"
    mkfs.ext4 -q -F "$work/source.img"
    mkfs.ext4 -q -F "$work/rsync.img"
    attach "$work/source.img" "$src"
    mkdir -p "$src/root"
    for dir in /usr /etc /var/lib; do
        mkdir -p "$src/root$(dirname "$dir")"
        cp -a --one-file-system "$dir" "$src/root$(dirname "$dir")/"
    done
    rm -rf "$src/root/var/lib/pimigrate"
    # What pimigrate reads of a Pi system: its boot files (a directory of
    # the tree here: this kernel has no vfat), a kernel whose modules the
    # tree has, an fstab naming its root.
    mkdir -p "$src/root/boot/firmware" "$src/root/usr/lib/modules/6.6.0-bench"
    printf 'kernel=kernel8.img\n' >"$src/root/boot/firmware/config.txt"
    printf 'console=tty1 root=PARTUUID=0b5e0b5e-02 rootfstype=ext4 rootwait\n' >"$src/root/boot/firmware/cmdline.txt"
    printf 'Linux version 6.6.0-bench (bench@pimigrate) #1\n' >"$src/root/boot/firmware/kernel8.img"
    printf 'proc /proc proc defaults 0 0\nPARTUUID=0b5e0b5e-02 / ext4 defaults,noatime 0 1\n' >"$src/root/etc/fstab"
    sync
    touch "$work/ready-v1"
else
    attach "$work/source.img" "$src"
fi
attach "$work/rsync.img" "$rs"
standby_loop=$(losetup -f --show "$work/standby.img")
tree=$src/root
# The tree is a mount point, as / is on a Pi: pimigrate reads a mounted
# root's used space from statvfs and walks a plain directory to count it,
# which a sync of a real system never does.
mount --bind "$tree" "$tree"

psync() {
    "$pimigrate" --source-root "$tree" --boot-dir "$tree/boot/firmware" --state-dir "$state" \
        --log-dir "$state/log" "$@"
}

# The standby's root, mounted read-only at $work/standby-root for a diff.
standby_start=
mount_standby() {
    local device
    device=$(losetup -f --show -r -o "$standby_start" "$standby_loop")
    mkdir -p "$work/standby-root"
    mount -o ro "$device" "$work/standby-root"
}
unmount_standby() {
    local device
    device=$(findmnt -n -o SOURCE "$work/standby-root")
    umount "$work/standby-root"
    losetup -d "$device" 2>/dev/null || true
}

entries=$(find "$tree" -xdev | wc -l)
bytes=$(du -s --block-size=1 --apparent-size "$tree" | cut -f1)
say "tree: $entries entries, $((bytes >> 20)) MiB"

say "the first copies (pimigrate: the standby's layout and a full copy)"
if [[ ! -s $state/standby.json ]]; then
    psync --json sync --target "$standby_loop" --yes --seed 7 >"$work/first.json" ||
        die "pimigrate's first sync failed: $(tail -c 2000 "$work/first.json")"
fi
rsync -aHAX --delete --numeric-ids "$tree/" "$rs/"
standby_start=$(sfdisk -J "$standby_loop" | jq '.partitiontable.partitions[0].start * 512')
# One more sync of each, untimed, so both start from the tree as it is.
psync -q sync --yes >/dev/null || die "pimigrate sync failed"
rsync -aHAX --delete --numeric-ids "$tree/" "$rs/"

# The standby's own files, which differ from the tree on purpose.
own='^(\.d..t...... \./|.* etc/fstab|.* var/lib/pimigrate/.*|.* var/lib/pimigrate/|.* lost\+found/?|.*boot/firmware/.+)$'

# diff_tree TARGET CHANGED-LIST: entries rsync would still change in
# TARGET (whole tree by metadata; the changed files by content too).
diff_tree() {
    {
        rsync -naHAX --delete --numeric-ids --itemize-changes "$tree/" "$1/"
        if [[ -s $2 ]]; then
            # Files removed this round are listed too: rsync says so on stderr.
            rsync -naHAXc --numeric-ids --itemize-changes --files-from="$2" "$tree/" "$1/" 2>/dev/null
        fi
    } | grep -Ev "$own" | sort -u || true
}

# change ROUND: changes 1 % of the tree's regular files (a different set
# each round) and writes their names to $work/changed-ROUND.
change() {
    local round=$1 list=$work/changed-$1 n=0 i=0 file
    : >"$list"
    local step=100
    while IFS= read -r -d '' file; do
        i=$((i + 1))
        (( (i + round) % step == 0 )) || continue
        n=$((n + 1))
        case $((n % 10)) in
            0) # same size, same mtime, other bytes: rsync's quick check misses it
                local stamp
                stamp=$(stat -c %y "$tree/$file")
                printf 'X' | dd of="$tree/$file" bs=1 seek=0 conv=notrunc status=none
                touch -d "$stamp" "$tree/$file" ;;
            1) chmod o-r "$tree/$file" ;;
            2) rm -f "$tree/$file"; printf 'added %d\n' "$n" >"$tree/$file.bench-new-$round"
               echo "$file.bench-new-$round" >>"$list" ;;
            *) printf 'round %d\n' "$round" >>"$tree/$file" ;;
        esac
        echo "$file" >>"$list"
    done < <(cd "$tree" && find . -xdev -type f -size +0 -not -path './boot/*' -print0)
    echo "$n"
}

# timed CMD...: seconds, with the caches dropped first and the flush counted.
timed() {
    sync
    echo 3 >/proc/sys/vm/drop_caches
    /usr/bin/time -f '%e' -o "$work/time.txt" bash -c '"$@" >/dev/null 2>&1 && sync' _ "$@" ||
        die "$* failed"
    cat "$work/time.txt"
}

results=$work/results.txt
: >"$results"
rsync_missed=0
run_case() { # NAME ROUND PIMIGRATE-FLAGS RSYNC-FLAGS
    local name=$1 round=$2 pflags=$3 rflags=$4 list=$work/changed-none p r missed
    : >"$list"
    if [[ $name == 1% ]]; then
        changed=$(change "$round")
        list=$work/changed-$round
    fi
    # shellcheck disable=SC2086
    p=$(timed "$pimigrate" --source-root "$tree" --boot-dir "$tree/boot/firmware" --state-dir "$state" --log-dir "$state/log" -q sync --yes $pflags)
    # shellcheck disable=SC2086
    r=$(timed rsync $rflags --numeric-ids "$tree/" "$rs/")
    mount_standby
    missed=$(diff_tree "$work/standby-root" "$list")
    unmount_standby
    [[ -z $missed ]] || die "pimigrate sync left differences ($name, round $round):
$missed"
    missed=$(diff_tree "$rs" "$list" | wc -l)
    rsync_missed=$((rsync_missed + missed))
    printf '  %-9s run %d: pimigrate %6.2f s, rsync %6.2f s%s\n' "$name" "$round" "$p" "$r" \
        "$([[ $missed == 0 ]] || echo ", rsync missed $missed entries")"
    echo "$name $p $r $missed" >>"$results"
}

say "$runs runs each: nothing changed, 1 % changed; $checksum_runs with --checksum"
round=0
for ((run = 1; run <= runs; run++)); do
    round=$((round + 1)); run_case unchanged "$round" "" "-aHAX --delete"
    round=$((round + 1)); run_case 1% "$round" "" "-aHAX --delete"
done
for ((run = 1; run <= checksum_runs; run++)); do
    round=$((round + 1)); run_case checksum "$round" "--checksum" "-aHAXc --delete"
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
table=$work/table.md
{
    echo "One run of \`scripts/bench-sync.sh\` ($(date -u +%Y-%m-%d), $(nproc) CPUs, kernel $(uname -r)):"
    echo "a tree of $entries entries ($((bytes >> 20)) MiB: this machine's /usr, /etc and /var/lib) on loop-backed ext4,"
    echo "caches dropped before each run, the final flush counted; medians of $runs runs ($checksum_runs with --checksum)."
    echo
    echo "| case | pimigrate sync s | rsync s | rsync / pimigrate | entries rsync missed |"
    echo "| --- | ---: | ---: | ---: | ---: |"
    for name in unchanged 1% checksum; do
        grep -q "^$name " "$results" || continue
        p=$(grep "^$name " "$results" | cut -d' ' -f2 | median)
        r=$(grep "^$name " "$results" | cut -d' ' -f3 | median)
        m=$(grep "^$name " "$results" | awk '{s += $4} END {print s}')
        flags=$([[ $name == checksum ]] && echo " (\`--checksum\` / \`-aHAXc --delete\`)" || echo " (\`-aHAX --delete\`)")
        awk -v n="$name$flags" -v p="$p" -v r="$r" -v m="$m" \
            'BEGIN { printf "| %s | %.2f | %.2f | %.2fx | %d |\n", n, p, r, r / p, m }'
    done
    echo
    echo "pimigrate's standby matched the tree after every run (rsync -naHAX --delete over the tree, -c over the changed files)."
} >"$table"
say "results"
cat "$table"

if [[ $write_docs == yes ]]; then
    doc=docs/internals/sync.md
    awk -v table="$table" '
        /^<!-- bench-sync:begin/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
        /^<!-- bench-sync:end/ { skip = 0 }
        !skip { print }' "$doc" >"$doc.new"
    mv "$doc.new" "$doc"
    echo "bench-sync: $doc updated"
fi
