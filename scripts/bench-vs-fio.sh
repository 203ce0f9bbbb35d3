#!/usr/bin/env bash
# Runs pimigrate's benchmark suite and the equivalent fio jobs on the same
# file, with the same size and parameters, and prints per test: pimigrate,
# fio and their ratio. Two places are measured: a file on this machine's
# disk, and a file on a loop-backed ext4 made here.
#
# Each test alternates which tool goes first over several rounds, and the
# median of each side is compared: a virtual disk varies by more than the
# 10% we want to resolve from one run to the next.
#
# Usage: sudo scripts/bench-vs-fio.sh [DIR]   (DIR defaults to /var/tmp)
# Environment: RUNTIME (s, default 3), SIZE (MiB, default 512), ROUNDS (9).
# Takes about 20 minutes with the defaults; measure on an otherwise idle
# machine.
set -euo pipefail

dir=${1:-/var/tmp}
runtime=${RUNTIME:-3}
size_mib=${SIZE:-512}
rounds=${ROUNDS:-9}
repo=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
    echo "bench-vs-fio: run as root (it makes a loop device and mounts it)" >&2
    exit 1
fi
if ! command -v fio >/dev/null; then
    apt-get install -y fio >/dev/null || { apt-get update >/dev/null && apt-get install -y fio >/dev/null; }
fi
if [ ! -x /usr/bin/time ]; then
    apt-get install -y time >/dev/null
fi

cargo build --release --quiet --manifest-path "$repo/Cargo.toml" -p pimigrate
pimigrate="$repo/target/release/pimigrate"

work=$(mktemp -d /var/tmp/bench-vs-fio.XXXXXX)
loopdev=""
cleanup() {
    if mountpoint -q "$work/mnt" 2>/dev/null; then umount "$work/mnt"; fi
    if [ -n "$loopdev" ]; then losetup -d "$loopdev"; fi
    rm -f "$dir/pimigrate-vs-fio.dat"
    rm -rf "$work"
}
trap cleanup EXIT

# name | fio rw | block size | queue depth
tests=(
    "SEQ1M Q8 read|read|1m|8"
    "SEQ1M Q1 read|read|1m|1"
    "RND4K Q32 read|randread|4k|32"
    "RND4K Q1 read|randread|4k|1"
    "SEQ1M Q8 write|write|1m|8"
    "SEQ1M Q1 write|write|1m|1"
    "RND4K Q32 write|randwrite|4k|32"
    "RND4K Q1 write|randwrite|4k|1"
)

# pimigrate's ramp for this runtime (it prints it in every report).
ramp=$(python3 -c "print(min(1.0, $runtime / 5.0))")

run_pimigrate() { # file test out
    "$pimigrate" --state-dir "$work/state" bench --json --no-save --engine io-uring \
        --runtime "$runtime" --file "$1" --test "$2" >"$3"
}

run_fio() { # file rw bs qd out
    local extra=()
    case $2 in *write) extra=(--end_fsync=1) ;; esac
    fio --name=job --filename="$1" --size="${size_mib}M" --direct=1 --ioengine=io_uring \
        --rw="$2" --bs="$3" --iodepth="$4" --time_based --runtime="$runtime" \
        --ramp_time="$ramp" --norandommap --randrepeat=0 --lat_percentiles=1 \
        --output-format=json "${extra[@]}" >"$5"
}

measure() { # label dir
    local label=$1 place=$2 file="$2/pimigrate-vs-fio.dat"
    # Random data, laid out once: both tools read and write the same blocks.
    dd if=/dev/urandom of="$file" bs=1M count="$size_mib" oflag=direct status=none
    sync
    local round i
    for round in $(seq 1 "$rounds"); do
        for i in "${!tests[@]}"; do
            IFS='|' read -r name rw bs qd <<<"${tests[$i]}"
            local base="$work/out/$label/$i.$round"
            mkdir -p "$(dirname "$base")"
            if [ $((round % 2)) -eq 1 ]; then
                run_fio "$file" "$rw" "$bs" "$qd" "$base.fio.json"
                run_pimigrate "$file" "$name" "$base.pm.json"
            else
                run_pimigrate "$file" "$name" "$base.pm.json"
                run_fio "$file" "$rw" "$bs" "$qd" "$base.fio.json"
            fi
        done
    done
    rm -f "$file"
}

echo "bench-vs-fio: $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n), $(uname -sr), $(nproc) CPUs, fio $(fio --version)" >&2
echo "bench-vs-fio: ${size_mib} MiB file, ${runtime} s per test after a ${ramp} s ramp, ${rounds} rounds" >&2

measure disk "$dir"

mkdir -p "$work/mnt"
truncate -s $((size_mib + 256))M "$work/ext4.img"
mkfs.ext4 -q -F "$work/ext4.img"
# Direct I/O on the backing file, so the loop device behaves like a disk
# instead of serving reads from the page cache.
loopdev=$(losetup --direct-io=on -f --show "$work/ext4.img")
mount "$loopdev" "$work/mnt"
measure loop-ext4 "$work/mnt"

python3 - "$work/out" "$rounds" "${tests[@]}" <<'PY'
import json, statistics, sys
out, rounds, tests = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def pm(path):
    r = json.load(open(path))["results"][0]
    return r["iops"], r["mb_per_s"], r["latency"]["p99_us"], r["cpu_us_per_io"]

def fio(path):
    job = json.load(open(path))["jobs"][0]
    side = job["read"] if job["read"]["total_ios"] else job["write"]
    p99 = side["lat_ns"]["percentile"]["99.000000"] / 1000
    cpu = (job["usr_cpu"] + job["sys_cpu"]) / 100 * job["job_runtime"] / 1000
    return side["iops"], side["bw_bytes"] / 1e6, p99, cpu * 1e6 / max(side["total_ios"], 1)

print("| place | test | pimigrate MB/s | fio MB/s | ratio | pimigrate IOPS | fio IOPS | ratio | p99 us pimigrate | fio | ratio | CPU us/IO pimigrate | fio | ratio |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
tally = {"throughput": [0, 0], "p99": [0, 0], "cpu": [0, 0]}
def count(kind, ok):
    tally[kind][0] += ok
    tally[kind][1] += 1
for label in ("disk", "loop-ext4"):
    for i, spec in enumerate(tests):
        name = spec.split("|")[0]
        a = [pm(f"{out}/{label}/{i}.{r}.pm.json") for r in range(1, rounds + 1)]
        b = [fio(f"{out}/{label}/{i}.{r}.fio.json") for r in range(1, rounds + 1)]
        med = lambda rows, k: statistics.median(row[k] for row in rows)
        cells = []
        for k, fmt in ((1, "{:.1f}"), (0, "{:.0f}"), (2, "{:.0f}"), (3, "{:.2f}")):
            x, y = med(a, k), med(b, k)
            ratio = x / y if y else float("nan")
            cells += [fmt.format(x), fmt.format(y), f"{ratio:.2f}"]
            if k == 0:  # the MB/s ratio is the same: one block size
                count("throughput", 0.90 <= ratio <= 1.10)
            elif k == 2:
                count("p99", 0.80 <= ratio <= 1.20)
            elif k == 3 and name.startswith("RND4K Q32"):
                count("cpu", ratio <= 1.20)
        print(f"| {label} | {name} | " + " | ".join(cells) + " |")

# Targets: throughput and IOPS within 0.90-1.10 of fio's, p99 within 20 %,
# CPU time per I/O at RND4K Q32 at most 1.2x fio's.
print()
print("in range: MB/s and IOPS (0.90-1.10) {}/{}, p99 (0.80-1.20) {}/{}, "
      "CPU per I/O at RND4K Q32 (<= 1.2x) {}/{}".format(
          *tally["throughput"], *tally["p99"], *tally["cpu"]))
PY
