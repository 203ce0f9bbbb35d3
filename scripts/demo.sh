#!/usr/bin/env bash
# The main job, on a fresh Debian or Ubuntu machine (no Raspberry Pi needed):
# the whole story on an emulated Raspberry Pi 4 with an A1-class SD card, a
# USB flash drive and a USB SSD. The wizard runs unattended: it benchmarks
# the drives, recommends the SSD (and warns that the flash drive writes
# slower than the SD card), plans and migrates; the Pi trial-boots into the
# SSD, `pimigrate verify --commit` makes it permanent and benchmarks the new
# root; a normal boot comes up on the SSD. At the end: the recommendation,
# the before/after table, and where the logs are.
#
# It is the testbed's `wizard-story` scenario (testbed/run.sh installs the
# host packages, builds pimigrate, builds or reuses the guest image), with
# the guest's output streamed while each boot runs. About 10-15 minutes on
# a 2-core machine, plus a few minutes the first time (packages, build,
# image). Exits non-zero if any step of the story fails.
#
#   sudo ./scripts/demo.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

[[ $(id -u) == 0 ]] || die "run as root (QEMU disk images, debootstrap for the guest image): sudo $0"
ensure_build_tools

scenario=wizard-story
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
logs=$target_dir/testbed-logs/$scenario
guest_out=$target_dir/testbed-work/$scenario/share/out/stdout
started=$SECONDS

say "setting up: host packages, building pimigrate and the testbed, the guest image (cached after the first run)"
say "then three boots of the emulated Pi; each boot's job output is shown as it runs (prefixed 'guest |')"

# The harness empties the share's out/ before each boot: follow the file by
# name so each boot's output is picked up when the guest starts writing. A
# previous run's output is removed first so that it is not shown as this one's.
rm -f "$guest_out"
# --pid: tail ends with this script even if only sed is killed below.
tail -F -n +1 --pid=$$ "$guest_out" 2>/dev/null | sed -u 's/^/  guest | /' &
follower=$!
stop_follower() { kill "$follower" 2>/dev/null; wait "$follower" 2>/dev/null; }
trap stop_follower EXIT

testbed/run.sh "$scenario"
status=$?
# Let the follower print the last lines of the final boot.
sleep 1
stop_follower
trap - EXIT

elapsed=$((SECONDS - started))
if [[ $status != 0 ]]; then
    die "the story failed (status $status) after $((elapsed / 60)) min $((elapsed % 60)) s; logs: $logs/"
fi
for file in recommendation.txt before-after.txt; do
    [[ -s $logs/$file ]] || die "the story passed but left no $logs/$file"
done

say "the recommendation (boot 1, the wizard's benchmarks)"
cat "$logs/recommendation.txt"
echo
say "before/after (boot 2, the trial boot on the SSD, after verify --commit)"
cat "$logs/before-after.txt"
echo
say "done in $((elapsed / 60)) min $((elapsed % 60)) s; every boot's console, job output and the JSON reports: $logs/"
