#!/bin/bash
# Build (or reuse) the ARM lane's SD card image: Debian bookworm arm64 laid
# out like Raspberry Pi OS, with Debian's raspi-firmware filling
# /boot/firmware, for QEMU's raspi3b (and raspi4b) machines.
#
# Usage: build-image.sh [--print-key]
#
# Cached like the x86 image (../image/build-image.sh), under
# $PI_TESTBED_CACHE/images-arm64/<key>, the key a hash of this folder. The
# last line on stdout is the image folder; everything else goes to stderr.
# The arm64 root is made under qemu-user (binfmt_misc); nothing is mounted
# but the chroot's own /proc, /sys, /dev and its /boot/firmware bind mount.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${PI_TESTBED_CACHE:-/var/cache/pimigrate-testbed}
mirror=${PI_TESTBED_MIRROR:-http://deb.debian.org/debian}

log() { echo "build-image-arm64: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# shellcheck source=../image-common/recipe.sh
. "$here/../image-common/recipe.sh"
key=$(recipe_key "$here")
if [[ ${1:-} == --print-key ]]; then echo "$key"; exit 0; fi

out=$cache/images-arm64/$key
if [[ -f $out/READY ]]; then
    log "cached image $out"
    echo "$out"
    exit 0
fi

[[ $(id -u) == 0 ]] || die "must run as root (debootstrap, chroot)"
for tool in debootstrap sfdisk mkfs.vfat mkfs.ext4 mcopy dd truncate; do
    command -v "$tool" >/dev/null || die "$tool not found: run testbed/run.sh --packages"
done
grep -qx enabled /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null ||
    die "arm64 binaries do not run here: qemu-user is not registered with binfmt_misc (testbed/run.sh registers it for an ARM scenario: ensure_qemu_user in scripts/lib.sh)"

mkdir -p "$cache/images-arm64" "$cache/debs-arm64"
exec 9>"$cache/build-arm64.lock"
flock 9
if [[ -f $out/READY ]]; then echo "$out"; exit 0; fi

work=$(mktemp -d "$cache/build-arm64.XXXXXX")
root=$work/rootfs
cleanup() {
    for m in boot/firmware dev/pts dev proc sys; do
        mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"
    done
    rm -rf "$work"
}
trap cleanup EXIT

# The SD card's disk signature: its partitions are PARTUUID=$sig-01 and -02.
sig=7a3b5c01

# --- 1. Debian bookworm arm64 ------------------------------------------------------
include=systemd-sysv,udev,kmod,e2fsprogs,dosfstools,util-linux,fdisk,rsync
include+=,initramfs-tools,zstd,procps,jq,mtools,usbutils
log "debootstrap bookworm arm64 into $root"
debootstrap --arch=arm64 --variant=minbase --components=main,non-free-firmware \
    --include="$include" --cache-dir="$cache/debs-arm64" bookworm "$root" "$mirror" >&2

copy_recipe_files "$here" "$root"
# raspi-firmware writes cmdline.txt from this file (and again at every
# kernel or initramfs update, as on a real Debian Pi).
cat >"$root/etc/default/raspi-firmware" <<CONF
ROOTPART=PARTUUID=$sig-02
CONSOLES="ttyAMA0,115200"
CONF
cat >"$root/etc/fstab" <<FSTAB
proc                  /proc           proc    defaults          0       0
PARTUUID=$sig-01  /boot/firmware  vfat    defaults          0       2
PARTUUID=$sig-02  /               ext4    defaults,noatime  0       1
FSTAB

mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
# raspi-firmware's hooks only fill /boot/firmware when it is a mountpoint.
mkdir -p "$root/boot/firmware"
mount --bind "$root/boot/firmware" "$root/boot/firmware"

log "installing the kernel and raspi-firmware"
# /etc/default/raspi-firmware, written above, is the package's conffile:
# keep ours without asking.
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    --no-install-recommends linux-image-arm64 raspi-firmware >&2
chroot "$root" systemctl enable testbed-agent.service >&2
chroot "$root" systemctl mask apt-daily.timer apt-daily-upgrade.timer \
    e2scrub_all.timer e2scrub_reap.service fstrim.timer dpkg-db-backup.timer \
    getty-static.service getty@tty1.service systemd-binfmt.service >&2
chroot "$root" systemctl set-default multi-user.target >&2
chroot "$root" passwd -d root >&2
echo raspberrypi >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\traspberrypi\n' >"$root/etc/hosts"
chroot "$root" apt-get clean

fw=$root/boot/firmware
# raspi-firmware's kernel hook copies upstream Linux's device trees (the
# firmware looks for these names first, as config.txt says upstream_kernel=1).
for f in config.txt cmdline.txt bcm2837-rpi-3-b.dtb bcm2711-rpi-4-b.dtb; do
    [[ -f $fw/$f ]] || die "raspi-firmware left no $f in /boot/firmware: $(ls "$fw" | tr '\n' ' ')"
done
grep -q "root=PARTUUID=$sig-02" "$fw/cmdline.txt" ||
    die "cmdline.txt does not name the root partition: $(cat "$fw/cmdline.txt")"
kver=$(ls "$root/lib/modules")
[[ $(wc -w <<<"$kver") == 1 ]] || die "expected one kernel, got: $kver"
modlist=$(chroot "$root" lsinitramfs "/boot/initrd.img-$kver")
for mod in bcm2835 sdhci-iproc dwc2 usb-storage uas ext4 vfat; do
    grep -q "/${mod//[-_]/[-_]}\.ko" <<<"$modlist" ||
        die "initramfs lacks module $mod: check files/etc/initramfs-tools/hooks/testbed-storage"
done

# Trim what the emulated Pi never uses: a root-only migration copies the
# whole root over QEMU's dwc2 USB, where every megabyte costs. raspi3b has
# no PCIe, network, GPU, sound or camera; keep the SoC's platform drivers
# (clocks, firmware mailbox, reset, watchdog for reboot, pinctrl, USB PHY)
# and the storage, USB and filesystem ones.
moddir=$root/lib/modules/$kver/kernel
drop='^(sound|net|drivers/(gpu|media|net|infiniband|staging|iio|bluetooth|isdn|ata|md|target'
drop+='|thunderbolt|video|nvme|scsi/[^/]+|input|hid|spi|mtd|misc|hwmon|leds|edac|rtc|w1'
drop+='|vdpa|vfio|vhost|nfc|atm|fpga|gnss|comedi|crypto|dma-buf|pci|platform|ptp|soundwire'
drop+='|accel|cxl|firewire|greybus|memstick|mfd|most|mux|ntb|nvmem|pcmcia|perf|pwm|remoteproc'
drop+='|rpmsg|siox|slimbus|ssb|bcma|tty|uio|usb/(serial|misc|musb|typec|cdns3|chipidea|mtu3))'
drop+='|fs/(btrfs|xfs|ocfs2|gfs2|nfs|nfsd|cifs|smb|ceph|ubifs|f2fs|jfs|reiserfs|nilfs2|udf|ntfs3?'
drop+='|erofs|squashfs|orangefs|afs|coda|dlm|lockd|9p|hfs|hfsplus|isofs|quota|overlayfs|zonefs))/'
before=$(du -sm "$moddir" | cut -f1)
(cd "$moddir" && find . -name '*.ko*' | sed 's#^\./##' | grep -E "$drop" | xargs -r rm -f)
find "$moddir" -type d -empty -delete
# dwc2 links against the USB gadget core (udc-core) even as a host, so
# usb/gadget stays. The initramfs is made again from the trimmed tree, as
# the next kernel or initramfs update in the guest makes it (pi3-root-only
# boots one), and must still hold the boot drivers and their dependencies.
chroot "$root" depmod "$kver"
log "kernel modules trimmed from ${before} MB to $(du -sm "$moddir" | cut -f1) MB"
chroot "$root" update-initramfs -u -k "$kver" >&2
modlist=$(chroot "$root" lsinitramfs "/boot/initrd.img-$kver")
for mod in bcm2835 sdhci-iproc dwc2 udc-core usb-storage uas ext4 vfat; do
    grep -q "/${mod//[-_]/[-_]}\.ko" <<<"$modlist" ||
        die "the initramfs made from the trimmed modules lacks $mod"
done

# The boot partition's files, out of the root tree: the FAT gets them.
boot=$work/boot-files
mkdir -p "$boot"
cp -a "$fw/." "$boot/"
umount "$fw"
rm -rf "${fw:?}"/*
for m in dev/pts dev proc sys; do umount "$root/$m"; done
rm -rf "$root"/usr/share/{doc,man,info,locale}/* "$root"/var/lib/apt/lists/*

# --- 2. The SD card image ----------------------------------------------------------
# Raspberry Pi OS layout: p1 FAT32 512 MiB at sector 8192, p2 ext4 to the end.
# QEMU's raspi SD card wants a power-of-two size.
img=$work/sd-bookworm-arm64.img
img_size=$((4 * 1024 * 1024 * 1024))
p1_start=8192
p1_sectors=$((512 * 1024 * 2))
p2_start=$((p1_start + p1_sectors))
p2_sectors=$((img_size / 512 - p2_start))
truncate -s "$img_size" "$img"
sfdisk --quiet "$img" >&2 <<SFDISK
label: dos
label-id: 0x$sig
unit: sectors

start=$p1_start, size=$p1_sectors, type=c
start=$p2_start, size=$p2_sectors, type=83
SFDISK
mkfs.vfat -F 32 -n bootfs -h "$p1_start" --offset "$p1_start" "$img" $((p1_sectors / 2)) >&2
mcopy -s -i "$img@@$((p1_start * 512))" "$boot"/* ::/ >&2
rootimg=$work/root.ext4
mkfs.ext4 -q -F -L rootfs -d "$root" "$rootimg" $((p2_sectors / 2))k >&2
dd if="$rootimg" of="$img" bs=4M seek=$((p2_start * 512)) oflag=seek_bytes \
    conv=notrunc,sparse status=none
rm -f "$rootimg"

cat >"$work/image.env" <<META
KEY=$key
KERNEL_VERSION=$kver
IMAGE=sd-bookworm-arm64.img
SIGNATURE=$sig
BUILT=$(date -u +%FT%TZ)
META
mkdir -p "$out"
mv "$img" "$work/image.env" "$out/"
touch "$out/READY"
ls -1dt "$cache/images-arm64"/*/ | tail -n +3 | while read -r old; do
    [[ ${old%/} != "$out" ]] && rm -rf "${old%/}" && log "pruned $old"
done
log "built $out"
echo "$out"
