#!/bin/bash
# Build (or reuse) the testbed's Pi-like SD card images.
#
# Usage: build-image.sh [--print-key]
#
# The images are cached outside any checkout, under $PI_TESTBED_CACHE
# (default /var/cache/pimigrate-testbed), keyed on a hash of every file in this
# folder: CI runs from a fresh clone elsewhere on the same machine and must find
# the same cache, and any change to the recipe must produce a new image.
# The last line printed on stdout is the image folder; everything else goes to
# stderr so callers can take that line as the answer.
#
# No partition-table support and no vfat are needed on the host: the layout is
# written with sfdisk into the image file, FAT with `mkfs.vfat --offset` and
# mtools, ext4 with `mkfs.ext4 -d` into a file that is then copied in with dd.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${PI_TESTBED_CACHE:-/var/cache/pimigrate-testbed}
mirror=${PI_TESTBED_MIRROR:-http://deb.debian.org/debian}

log() { echo "build-image: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The key: file names and contents of the recipe folder and the shared files.
# shellcheck source=../image-common/recipe.sh
. "$here/../image-common/recipe.sh"
key=$(recipe_key "$here")
if [[ ${1:-} == --print-key ]]; then echo "$key"; exit 0; fi

out=$cache/images/$key
if [[ -f $out/READY ]]; then
    log "cached image $out"
    echo "$out"
    exit 0
fi

[[ $(id -u) == 0 ]] || die "must run as root (debootstrap, chroot)"
for tool in debootstrap sfdisk mkfs.vfat mkfs.ext4 mcopy mmd dd truncate; do
    command -v "$tool" >/dev/null || die "$tool not found: run testbed/run.sh, which installs the host packages"
done

mkdir -p "$cache/images" "$cache/debs"
# One build at a time per machine; a second caller waits and then reuses.
exec 9>"$cache/build.lock"
flock 9
if [[ -f $out/READY ]]; then echo "$out"; exit 0; fi

work=$(mktemp -d "$cache/build.XXXXXX")
root=$work/rootfs
cleanup() {
    for m in dev/pts dev proc sys; do
        mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"
    done
    rm -rf "$work"
}
trap cleanup EXIT

# --- 1. Debian bookworm, the packages a Pi OS "lite" has that matter here ----------
# The kernel is installed in a second step, after the initramfs configuration is
# in place, so its first initramfs already carries the storage modules.
include=systemd-sysv,udev,kmod,e2fsprogs,dosfstools,util-linux,fdisk,gdisk,parted
include+=,rsync,fio,initramfs-tools,zstd,mtools,acl,attr,usbutils,pciutils,jq,procps
include+=,nvme-cli,less
# For fleet tests (Ansible over SSH on a loopback port forward) and for driving
# the wizard in a pseudo-terminal inside the guest.
include+=,openssh-server,python3,tmux
log "debootstrap bookworm into $root"
debootstrap --variant=minbase --include="$include" --cache-dir="$cache/debs" \
    bookworm "$root" "$mirror" >&2

# Files the recipe copies in verbatim (agent, unit, initramfs config).
copy_recipe_files "$here" "$root"
chmod 0755 "$root/usr/local/sbin/testbed-agent"
# Where the rpi-eeprom package installs the bootloader images: empty here,
# the mount point on which tb-as-pi (testbed/pi-tools) shows the share's.
mkdir -p "$root/usr/lib/firmware/raspberrypi"

mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"

log "installing the kernel"
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends linux-image-amd64 >&2
chroot "$root" systemctl enable testbed-agent.service >&2
# Units that would only cost time in a short-lived guest without a screen:
# timers, virtual-terminal gettys (the console is ttyS0), NVMe-oF discovery,
# foreign binary formats (binfmt_misc is among the modules trimmed below).
chroot "$root" systemctl mask apt-daily.timer apt-daily-upgrade.timer \
    e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer \
    dpkg-db-backup.timer getty-static.service getty@tty1.service \
    nvmf-autoconnect.service systemd-binfmt.service \
    proc-sys-fs-binfmt_misc.automount >&2
# Units a boot of the emulated Pi never needs, each a process or a mount
# that costs PID 1 time under TCG: kernel modules for hardware and
# filesystems no scenario uses (drm, pstore, configfs, fuse, dm), the
# kernel's debug and tracing mounts, hugepages and POSIX queues, a random
# seed, utmp records, the journal's flush (it is volatile), first-boot
# users, and password agents nobody answers.
chroot "$root" systemctl mask modprobe@drm.service modprobe@efi_pstore.service \
    modprobe@configfs.service modprobe@fuse.service modprobe@dm_mod.service \
    sys-fs-fuse-connections.mount sys-kernel-config.mount sys-kernel-debug.mount \
    sys-kernel-tracing.mount dev-hugepages.mount dev-mqueue.mount \
    systemd-pstore.service systemd-network-generator.service systemd-random-seed.service \
    systemd-update-utmp.service systemd-update-utmp-runlevel.service \
    systemd-journal-flush.service systemd-tmpfiles-clean.timer systemd-sysusers.service \
    uuidd.socket systemd-ask-password-wall.path systemd-ask-password-console.path >&2
# udev rules for hardware the testbed never attaches (input devices,
# cameras, sound, seats, device-mapper, btrfs, tape, infiniband, MTD,
# NVMe over fabrics): under TCG every coldplug event runs every rule, in
# the initramfs and again in the system. The rules for disks, USB, serial
# ports, modules and the network stay.
(cd "$root/usr/lib/udev/rules.d" && rm -f 55-dm.rules 60-cdrom_id.rules 60-drm.rules \
    60-evdev.rules 60-fido-id.rules 60-infiniband.rules 60-input-id.rules \
    60-persistent-alsa.rules 60-persistent-input.rules 60-persistent-storage-dm.rules \
    60-persistent-storage-tape.rules 60-persistent-v4l.rules 60-sensor.rules 64-btrfs.rules \
    70-camera.rules 70-joystick.rules 70-mouse.rules 70-touchpad.rules 71-seat.rules \
    73-seat-late.rules 75-probe_mtd.rules 78-sound-card.rules 85-hwclock.rules \
    95-dm-notify.rules 96-e2scrub.rules 70-nvmf-autoconnect.rules \
    71-nvmf-iopolicy-netapp.rules)
chroot "$root" systemctl set-default multi-user.target >&2
# A NIC exists only when a scenario asks for QEMU user networking; then
# systemd-networkd takes a DHCP lease (files/etc/systemd/network). Nothing
# may wait for the network: most boots have none, and there neither it nor
# sshd starts (a condition on the kernel's testbed.net, files/etc/systemd).
chroot "$root" systemctl enable systemd-networkd.service ssh.service >&2
chroot "$root" systemctl mask systemd-networkd-wait-online.service >&2
chroot "$root" passwd -d root >&2
echo raspberrypi >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\traspberrypi\n' >"$root/etc/hosts"
chroot "$root" apt-get clean

for m in dev/pts dev proc sys; do umount "$root/$m"; done

kver=$(ls "$root/lib/modules")
[[ $(wc -w <<<"$kver") == 1 ]] || die "expected one kernel in $root/lib/modules, got: $kver"
modlist=$(chroot "$root" lsinitramfs "/boot/initrd.img-$kver")
for tool in e2fsck logsave; do
    grep -q "sbin/$tool\$" <<<"$modlist" || die "initramfs lacks $tool: check ../image-common/files/etc/initramfs-tools/hooks/fsck-root"
done
for mod in sdhci-pci mmc_block xhci-pci uas usb-storage nvme ext4 vfat 9p 9pnet_virtio; do
    grep -q "/${mod//[-_]/[-_]}\.ko" <<<"$modlist" ||
        die "initramfs lacks module $mod: check files/etc/initramfs-tools/hooks/testbed-storage"
done

# Trim what the emulated Pi never uses. Migration scenarios copy the whole
# root from QEMU's SD card (a few MB/s under emulation), where every
# megabyte costs: of the kernel's modules (164 MB) keep only the drivers of
# the disks, buses and share the testbed attaches and what they depend on
# (about 20 MB). The initramfs carries its own copies of the boot-critical
# ones (files/etc/initramfs-tools/hooks/testbed-storage). Not drivers/ata:
# no scenario attaches a SATA disk, and with ahci at hand udev probed the
# q35 machine's six empty SATA ports in every boot.
moddir=$root/lib/modules/$kver/kernel
keep='^(fs/(ext4|jbd2|fat|nls|9p|netfs|fscache|fuse|autofs)/|fs/mbcache|net/(9p|core)/'
keep+='|drivers/(mmc|usb/(core|host|storage|common)|nvme|block|virtio|md|char)/'
keep+='|drivers/scsi/[^/]+$|drivers/net/(virtio_net|net_failover)|crypto/|lib/|arch/)'
(cd "$moddir" && find . -name '*.ko*' | sed 's#^\./##' | grep -Ev "$keep" | xargs -r rm -f)
find "$moddir" -type d -empty -delete
chroot "$root" depmod "$kver"
rm -rf "$root"/usr/share/{doc,man,info,locale}/*
rm -rf "$root"/var/lib/apt/lists/*

# --- 2. The SD card images ---------------------------------------------------------
# Raspberry Pi OS layout: p1 FAT32 512 MiB at sector 8192, p2 ext4 from the next
# 4 MiB boundary to the end. The SD card emulation wants a power-of-two size.
img_size=$((4 * 1024 * 1024 * 1024))
p1_start=8192
p1_sectors=$((512 * 1024 * 2))
p2_start=$((p1_start + p1_sectors))
p2_sectors=$((img_size / 512 - p2_start))

# $1 image, $2 disk signature (8 hex digits), $3 boot mountpoint, $4 staging root
make_sd() {
    local img=$1 sig=$2 bootdir=$3 tree=$4
    local boot=$work/boot-files
    log "making $img (boot at $bootdir, PARTUUID $sig)"
    rm -rf "$boot" && mkdir -p "$boot"
    cp "$work/kernel/vmlinuz" "$work/kernel/initrd.img" "$boot/"
    # Every file of boot/ (config.txt, start4.elf, ...), cmdline.txt with
    # the disk's signature filled in.
    cp "$here/boot/"* "$boot/"
    sed -i "s/@SIG@/$sig/" "$boot/cmdline.txt"

    sed -e "s/@SIG@/$sig/g" -e "s#@BOOTDIR@#$bootdir#" "$here/fstab.in" >"$tree/etc/fstab"
    mkdir -p "$tree$bootdir"

    truncate -s "$img_size" "$img"
    sfdisk --quiet "$img" >&2 <<SFDISK
label: dos
label-id: 0x$sig
unit: sectors

start=$p1_start, size=$p1_sectors, type=c
start=$p2_start, size=$p2_sectors, type=83
SFDISK
    mkfs.vfat -F 32 -n bootfs -h "$p1_start" --offset "$p1_start" "$img" $((p1_sectors / 2)) >&2
    local off=$((p1_start * 512))
    mcopy -i "$img@@$off" "$boot"/* ::/ >&2

    local rootimg=$work/root.ext4
    rm -f "$rootimg"
    mkfs.ext4 -q -F -L rootfs -d "$tree" "$rootimg" $((p2_sectors / 2))k >&2
    dd if="$rootimg" of="$img" bs=4M seek=$((p2_start * 512)) oflag=seek_bytes \
        conv=notrunc,sparse status=none
    rm -f "$rootimg"
}

# The FAT gets its own copy of the kernel and initramfs, as on a Pi.
mkdir -p "$work/kernel"
cp "$root/boot/vmlinuz-$kver" "$work/kernel/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$work/kernel/initrd.img"

# Bookworm layout: the boot partition at /boot/firmware; /boot stays on root.
make_sd "$work/sd-bookworm.img" 6c586e13 /boot/firmware "$root"

# Bullseye layout: the boot partition is /boot itself, so the root filesystem's
# /boot is just an empty mountpoint (its kernel files live on the FAT).
rm -rf "${root:?}/boot/"*
make_sd "$work/sd-bullseye.img" 5e3da7a1 /boot "$root"

cat >"$work/image.env" <<META
KEY=$key
KERNEL_VERSION=$kver
BOOKWORM_IMAGE=sd-bookworm.img
BOOKWORM_SIGNATURE=6c586e13
BULLSEYE_IMAGE=sd-bullseye.img
BULLSEYE_SIGNATURE=5e3da7a1
BUILT=$(date -u +%FT%TZ)
META

mkdir -p "$out"
mv "$work/sd-bookworm.img" "$work/sd-bullseye.img" "$work/image.env" "$out/"
touch "$out/READY"

# Keep the cache from growing without bound: drop images of older recipes,
# except the two most recent.
ls -1dt "$cache/images"/*/ | tail -n +3 | while read -r old; do
    [[ ${old%/} != "$out" ]] && rm -rf "${old%/}" && log "pruned $old"
done
log "built $out"
echo "$out"
