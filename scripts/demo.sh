#!/usr/bin/env bash
# The main job, on any Debian or Ubuntu machine (no Raspberry Pi needed):
# builds pimigrate, makes a Raspberry Pi OS-style SD card image (MBR, FAT32
# boot partition, ext4 root with a PARTUUID fstab), mounts its root
# read-only as the source, attaches an empty sparse "SSD" on a loop device
# as the target, and shows what pimigrate sees and exactly what it would do:
# `devices`, then the root-only and full-move plans. Nothing is written to
# either disk (the plans are dry runs); everything is removed at the end.
#
#   sudo ./scripts/demo.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

[[ $(id -u) == 0 ]] || die "run as root (loop devices and mounts): sudo $0"
ensure_build_tools
ensure_packages mkfs.ext4=e2fsprogs mkfs.vfat=dosfstools mcopy=mtools sfdisk=fdisk losetup=mount

say "building pimigrate"
cargo build --release --locked -q
pimigrate=$PWD/target/release/pimigrate

work=$(mktemp -d /var/tmp/pimigrate-demo.XXXXXX)
loops=()
cleanup() {
    mountpoint -q "$work/root" 2>/dev/null && umount "$work/root"
    for dev in "${loops[@]}"; do losetup -d "$dev" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

sig=6c586e13
sector=512 boot_start=8192 boot_sectors=1048576 root_start=1056768
sd_sectors=$((4 * 1024 * 1024 * 1024 / sector))
say "making a 4 GiB Raspberry Pi OS-style SD card image (sparse)"
truncate -s $((sd_sectors * sector)) "$work/sd.img"
sfdisk -q "$work/sd.img" <<SFDISK
label: dos
label-id: 0x$sig
start=$boot_start, size=$boot_sectors, type=c
start=$root_start, type=83
SFDISK

tree=$work/tree
mkdir -p "$tree"/{boot/firmware,etc,home/pi,usr,var/lib/dpkg,tmp,proc,sys,dev,run}
cp -a /usr/bin "$tree/usr/"
cp -a /etc/ssl /etc/os-release "$tree/etc/"
cat >"$tree/etc/fstab" <<FSTAB
proc            /proc           proc    defaults          0       0
PARTUUID=$sig-01  /boot/firmware  vfat    defaults          0       2
PARTUUID=$sig-02  /               ext4    defaults,noatime  0       1
# a swapfile is not a swap partition, no line here
#   use  dphys-swapfile swap[on|off]  for that
FSTAB
echo raspberrypi >"$tree/etc/hostname"
printf 'Package: e2fsprogs\nStatus: install ok installed\nVersion: %s\n\n' \
    "$(dpkg-query -W -f='${Version}' e2fsprogs)" >"$tree/var/lib/dpkg/status"
echo "notes" >"$tree/home/pi/notes.txt"

root_bytes=$(( (sd_sectors - root_start) * sector ))
mkfs.ext4 -q -F -L rootfs -d "$tree" -E offset=$((root_start * sector)) "$work/sd.img" $((root_bytes / 1024))k 2>/dev/null

boot=$work/bootfiles
mkdir -p "$boot"
echo "console=serial0,115200 console=tty1 root=PARTUUID=$sig-02 rootfstype=ext4 fsck.repair=yes rootwait quiet splash plymouth.ignore-serial-consoles" >"$boot/cmdline.txt"
printf '# http://rptl.io/configtxt\ndtparam=audio=on\narm_64bit=1\n[all]\n' >"$boot/config.txt"
mkfs.vfat -F 32 -n bootfs --offset $boot_start "$work/sd.img" $((boot_sectors * sector / 1024)) >/dev/null 2>&1
mcopy -i "$work/sd.img@@$((boot_start * sector))" "$boot/cmdline.txt" "$boot/config.txt" ::/

say "mounting the image's root read-only (this kernel may lack partition support: attach by offset)"
src=$(losetup -f --show -r -o $((root_start * sector)) --sizelimit "$root_bytes" "$work/sd.img")
loops+=("$src")
mkdir -p "$work/root" "$work/boot"
mount -o ro "$src" "$work/root"
# The boot partition is FAT: read it with mtools, no vfat driver needed.
mcopy -n -i "$work/sd.img@@$((boot_start * sector))" ::/cmdline.txt ::/config.txt "$work/boot/"

say "attaching an empty 64 GiB sparse disk as the target"
truncate -s 64G "$work/ssd.img"
target=$(losetup -f --show "$work/ssd.img")
loops+=("$target")

say "pimigrate devices --all"
"$pimigrate" --source-root "$work/root" --boot-dir "$work/boot" devices --all

say "pimigrate plan --target $target   (root-only: the SD card keeps booting)"
"$pimigrate" --source-root "$work/root" --boot-dir "$work/boot" plan --target "$target"

say "pimigrate plan --target $target --layout full --table gpt"
"$pimigrate" --source-root "$work/root" --boot-dir "$work/boot" plan --target "$target" --layout full --table gpt -q

say "and a refusal: the disk that holds the source root"
"$pimigrate" --source-root "$work/root" --boot-dir "$work/boot" plan --target "$src" || echo "(exit code $?: refused, as it should be)"

if [[ -n $(head -c 1048576 "$work/ssd.img" | tr -d '\0' | head -c 1) ]]; then
    die "the target was written to during a dry run"
fi
say "done: the target is still all zeros; nothing was written"
