#!/bin/bash
# Runs inside the guest of scripts/kernel-vm.sh, as root in the overlay over the host's files:
# mounts what a Linux machine has, then the command the host wrote into the shared directory, and
# leaves its exit status there. Arguments: the shared directory, the guest kernel's modules.
OUT=$1
MODULES=$2
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
ln -sf /proc/self/fd /dev/fd; ln -sf /proc/self/fd/0 /dev/stdin; ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
# /tmp stays the overlay's: a checkout there (a CI clone) must be visible; writes stay in the guest.
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mkdir -p "$OUT" /run/netns
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=262144 vmout "$OUT"
kver=${MODULES##*/}
mkdir -p "/lib/modules/$kver"
mount --bind "$MODULES" "/lib/modules/$kver"
dmesg -n 1 2>/dev/null
ip link set lo up
hostname sm4j-vm
echo "kernel-vm: $(uname -r) up in $(cut -d' ' -f1 /proc/uptime) s"

bash "$OUT/.sm4j-cmd" < /dev/null
rc=$?
echo "$rc" > "$OUT/.sm4j-rc"
umount "$OUT"
exit "$rc"
