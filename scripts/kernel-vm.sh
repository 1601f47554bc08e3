#!/usr/bin/env bash
# Boots a Debian kernel package under QEMU and runs one command in it as root:
#
#   scripts/kernel-vm.sh [--mem 3G] [--cpus 2] [--timeout 1800] [--out DIR] PACKAGE -- COMMAND [ARG...]
#   scripts/kernel-vm.sh --fetch PACKAGE        # only download and prepare the kernel
#
# PACKAGE is a Debian kernel image package (linux-image-6.1.0-57-amd64, linux-image-6.12.74+deb12-amd64,
# ...), taken from Debian's mirror with an apt state of its own: nothing is installed on the host.
# The guest sees the host's file system read-only (virtio-9p) under a RAM overlay, so the command
# runs what the host built, from the same directory, and may write anywhere (lost at power-off);
# $SM4J_VM_OUT is a directory the host keeps (--out DIR, else a temporary one removed at the
# end). /sys/fs/bpf, cgroup v2 and /run are fresh, /tmp is the host's under the overlay; the
# guest kernel's modules are at /lib/modules; only loopback exists (no network card). The
# command's output is printed as it runs; the exit status is the command's, 124 on timeout, 125
# when the guest never ran it.
#
# Emulated (TCG, no KVM here), one host thread for all vCPUs: the JVM crashed at compiled-code
# entry in 10 of 30 runs under multi-threaded TCG, 0 of 20 this way. Cost: boot to the command
# in 7-15 s; code runs 10-20x slower than on the host (docs/kernel.md, "Other kernels").
# Leaves nothing behind but its cache (target/kernel-vm, or $SM4J_KERNEL_CACHE): downloaded
# packages and the kernels extracted from them.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${SM4J_KERNEL_CACHE:-$ROOT/target/kernel-vm}
MEM=3G CPUS=2 TIMEOUT=1800 OUT="" FETCH_ONLY=0

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --mem) MEM=$2; shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --fetch) FETCH_ONLY=1; shift ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) echo "kernel-vm: unknown option $1" >&2; usage ;;
    *) if [ -z "${PKG:-}" ]; then PKG=$1; shift; else break; fi ;;
  esac
done
[ -n "${PKG:-}" ] || usage
[ "$FETCH_ONLY" = 1 ] || [ $# -gt 0 ] || { echo "kernel-vm: no command given (PACKAGE -- COMMAND)" >&2; usage; }
case "$PKG" in linux-image-*) ;; *) echo "kernel-vm: $PKG is not a Debian kernel image package (linux-image-...)" >&2; exit 2 ;; esac
if [ "$(id -u)" != 0 ]; then echo "kernel-vm: needs root (the download, the guest runs as root)" >&2; exit 1; fi

"$ROOT/scripts/install.sh" --check vm || exit 1

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

# --- the kernel: downloaded with a private apt state (scripts/install.sh kernel), extracted, modules indexed
KDIR=$CACHE/kernels/$PKG
if [ ! -f "$KDIR/ready" ]; then
  rm -rf "$KDIR"; mkdir -p "$KDIR/debs" "$KDIR/root"
  "$ROOT/scripts/install.sh" kernel "$PKG" "$KDIR/debs" "$CACHE/apt"
  for deb in "$KDIR"/debs/*.deb; do dpkg-deb -x "$deb" "$KDIR/root"; done
  rm -rf "$KDIR/debs"
  # boot/vmlinuz-KVER, or (7.x packages) usr/lib/modules/KVER/vmlinuz.
  vmlinuz=$(find "$KDIR/root" -path '*/boot/vmlinuz-*' -o -path '*/modules/*/vmlinuz' | head -1)
  [ -n "$vmlinuz" ] || { echo "kernel-vm: $PKG has no boot/vmlinuz-* nor modules/*/vmlinuz" >&2; exit 1; }
  case "$vmlinuz" in */vmlinuz) KVER=$(basename "$(dirname "$vmlinuz")") ;; *) KVER=${vmlinuz##*/vmlinuz-} ;; esac
  MODDIR=$(find "$KDIR/root" -maxdepth 4 -type d -path "*/modules/$KVER" | head -1)
  [ -n "$MODDIR" ] || { echo "kernel-vm: $PKG has no modules directory for $KVER" >&2; exit 1; }
  depmod -b "${MODDIR%/lib/modules/$KVER}" "$KVER" 2>/dev/null || depmod -b "${MODDIR%/usr/lib/modules/$KVER}" "$KVER"

  # A small initramfs: static busybox, the modules to reach the host's files, and init.
  ird=$KDIR/initramfs; mkdir -p "$ird/bin" "$ird/mods" "$ird/proc" "$ird/sys" "$ird/dev" "$ird/lower" "$ird/upper" "$ird/newroot"
  cp /bin/busybox "$ird/bin/busybox"
  declare -A seen=()
  order=()
  add_module() { # depth first: a module after what it depends on
    local name=$1 path deps d
    [ -z "${seen[$name]:-}" ] || return 0
    seen[$name]=1
    path=$(awk -F: -v n="$name" '{ f=$1; sub(/.*\//, "", f); sub(/\.ko(\.(xz|zst|gz))?$/, "", f); gsub(/-/, "_", f);
      m=n; gsub(/-/, "_", m); if (f == m) { print; exit } }' "$MODDIR/modules.dep")
    [ -n "$path" ] || return 0 # built in
    deps=${path#*:}; path=${path%%:*}
    for d in $deps; do d=${d##*/}; add_module "${d%%.ko*}"; done
    case "$path" in
      *.xz) xz -dc "$MODDIR/$path" ;; *.zst) zstd -qdc "$MODDIR/$path" ;; *.gz) gzip -dc "$MODDIR/$path" ;; *) cat "$MODDIR/$path" ;;
    esac > "$ird/mods/$name.ko"
    order+=("$name")
  }
  for m in virtio_pci 9pnet_virtio 9p overlay; do add_module "$m"; done
  printf '%s\n' "${order[@]}" > "$ird/mods/order"
  cat > "$ird/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /mods/order); do insmod /mods/$m.ko 2>/dev/null; done
fail() { echo "kernel-vm init: $*"; poweroff -f; }
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144 hostroot /lower || fail "no host root over 9p"
mount -t tmpfs -o mode=0755 tmpfs /upper; mkdir /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w /newroot || fail "no overlay"
# The kernel's own module requests (a veth link, a netfilter table) run from this root: to the host's
# modprobe in the guest's root, which has the guest kernel's modules.
mkdir -p /sbin; printf '#!/bin/sh\nexec chroot /newroot /sbin/modprobe "$@"\n' > /sbin/modprobe-guest
chmod +x /sbin/modprobe-guest; echo /sbin/modprobe-guest > /proc/sys/kernel/modprobe
chroot /newroot /bin/bash "$sm4j_guest" "$sm4j_out" "$sm4j_kernel"
sync
poweroff -f
EOF
  chmod +x "$ird/init"
  (cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1) > "$KDIR/initramfs.img"
  rm -rf "$ird"
  printf '%s\n%s\n%s\n' "$KVER" "$vmlinuz" "$MODDIR" > "$KDIR/ready"
fi
{ read -r KVER; read -r VMLINUZ; read -r MODDIR; } < "$KDIR/ready"
exec 9>&-
if [ "$FETCH_ONLY" = 1 ]; then echo "$PKG: kernel $KVER ready in $KDIR" >&2; exit 0; fi

# --- one run ---------------------------------------------------------------------------------------
mkdir -p "$CACHE/runs"
RUN=$(mktemp -d "$CACHE/runs/run.XXXXXX")
KEEP_OUT=1
if [ -z "$OUT" ]; then OUT=$RUN/out; KEEP_OUT=0; fi
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
QEMU_PID=""
cleanup() {
  if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then kill "$QEMU_PID" 2>/dev/null || true; wait "$QEMU_PID" 2>/dev/null || true; fi
  if [ "$KEEP_OUT" = 0 ]; then rm -rf "$RUN"; else rm -f "$OUT/.sm4j-cmd" "$OUT/.sm4j-rc"; rm -rf "$RUN"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# What the guest runs: the command, from this directory, with the variables that pick the JDK and
# the project's switches.
{
  printf 'cd %q\n' "$PWD"
  for v in $(compgen -e); do
    case "$v" in JAVA_HOME|MAVEN_OPTS|SM4J_*|SOCKMAP4J_*|CI) printf 'export %s=%q\n' "$v" "${!v}" ;; esac
  done
  printf 'export SM4J_VM=1 SM4J_VM_OUT=%q SM4J_VM_KERNEL=%q\n' "$OUT" "$KVER"
  printf '%q ' "$@"; echo
} > "$OUT/.sm4j-cmd"

echo "kernel-vm: booting $KVER ($PKG), $CPUS vCPUs, $MEM, timeout ${TIMEOUT}s" >&2
start=$(date +%s)
timeout -k 10 "$TIMEOUT" qemu-system-x86_64 \
  -accel tcg,thread=single -cpu max -smp "$CPUS" -m "$MEM" \
  -display none -monitor none -serial stdio -nodefaults -no-reboot -nic none \
  -kernel "$VMLINUZ" -initrd "$KDIR/initramfs.img" \
  -append "console=ttyS0 ${SM4J_VM_DEBUG:+ignore_}quiet loglevel=${SM4J_VM_DEBUG:+7}${SM4J_VM_DEBUG:-1} panic=-1 rdinit=/init sm4j_guest=$ROOT/scripts/kernel-vm-guest.sh sm4j_out=$OUT sm4j_kernel=$MODDIR" \
  -fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap" \
  -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
  -fsdev "local,id=vmout,path=$OUT,security_model=none,multidevs=remap" \
  -device virtio-9p-pci,fsdev=vmout,mount_tag=vmout \
  < /dev/null > >(sed -u 's/\r$//') 2>&1 &
QEMU_PID=$!
wait "$QEMU_PID" || true
QEMU_PID=""
secs=$(( $(date +%s) - start ))
if [ -f "$OUT/.sm4j-rc" ]; then
  rc=$(cat "$OUT/.sm4j-rc")
  echo "kernel-vm: $KVER: exit $rc after ${secs}s" >&2
elif [ "$secs" -ge "$TIMEOUT" ]; then
  rc=124; echo "kernel-vm: $KVER: timed out after ${secs}s" >&2
else
  rc=125; echo "kernel-vm: $KVER: the guest stopped before the command ended (${secs}s)" >&2
fi
exit "$rc"
