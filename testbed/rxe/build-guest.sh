#!/bin/sh
# Builds the kernel-rxe guest: a Debian root file system (debootstrap, cached) packed with the
# guest's init into an initramfs, and the kernel to boot it with.
#
# usage: build-guest.sh DIR INIT INITRAMFS [EXTRA_BIN_DIR]
#   DIR        the cache directory of this guest: DIR/rootfs is made once, then reused
#   INIT       the guest's PID 1 (testbed/rxe/init)
#   INITRAMFS  the initramfs to write (the kernel goes beside it, as DIR/vmlinuz)
#   EXTRA_BIN_DIR  programs built on the host for the guest, copied into /usr/local/bin
# env: DEBIAN_MIRROR (default: the host's first Debian mirror, or deb.debian.org)
set -eu
DIR=$1 INIT=$2 OUT=$3 EXTRA=${4:-}
SUITE=bookworm
# The guest needs rdma_rxe (in the kernel image), the rdma tool, rdma-core's programs and
# perftest, and the procps/iproute2 tools the harness drives it with (pkill, ss).
PACKAGES=linux-image-amd64,rdma-core,ibverbs-utils,ibverbs-providers,perftest,rdmacm-utils,librpma0,iproute2,kmod,procps
# Debian 12's own kernel (6.1) has an rxe without ATOMIC WRITE and FLUSH (Linux 6.2 added
# them); bookworm-backports' kernel has both. The guest boots the newest kernel installed.
backports_kernel() {
  echo "deb $2 $SUITE-backports main" > "$1/etc/apt/sources.list.d/backports.list"
  chroot "$1" apt-get update -q
  # INITRD=No: the kernel's own initramfs is never booted (ours is built below).
  DEBIAN_FRONTEND=noninteractive INITRD=No chroot "$1" apt-get install -y -q --no-install-recommends \
    -t $SUITE-backports linux-image-amd64
  chroot "$1" apt-get clean
}
mkdir -p "$DIR"
if [ ! -x "$DIR/rootfs/usr/bin/ib_write_bw" ]; then
  mirror=${DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
  rm -rf "$DIR/rootfs.partial"
  debootstrap --variant=minbase --include=$PACKAGES $SUITE "$DIR/rootfs.partial" \
    "${mirror:-http://deb.debian.org/debian}"
  backports_kernel "$DIR/rootfs.partial" "${mirror:-http://deb.debian.org/debian}"
  mv "$DIR/rootfs.partial" "$DIR/rootfs"
fi
R=$DIR/rootfs
K=$(ls "$R/lib/modules" | sort -V | tail -1)
S=$DIR/stage
rm -rf "$S" && mkdir "$S"
# Everything but what a shell-driven guest never reads: modules (added below, only those
# needed), firmware, documentation, locales, apt's caches.
tar -C "$R" --exclude=./lib/modules --exclude=./usr/lib/modules --exclude=./usr/lib/firmware \
  --exclude=./boot --exclude=./usr/share/doc --exclude=./usr/share/locale \
  --exclude=./usr/share/man --exclude=./usr/share/info --exclude=./var/cache/apt \
  --exclude=./var/lib/apt/lists --exclude=./usr/lib/x86_64-linux-gnu/gconv \
  --exclude=./usr/share/zoneinfo --exclude=./usr/share/i18n -cf - . | tar -C "$S" -xf -
mkdir -p "$S/lib/modules/$K"
cp "$R/lib/modules/$K"/modules.builtin* "$R/lib/modules/$K/modules.order" "$S/lib/modules/$K/"
for m in virtio_pci virtio_net crc32_generic rdma_rxe ib_uverbs rdma_ucm ib_umad; do
  chroot "$R" modprobe -S "$K" --show-depends $m | awk '$1 == "insmod" {print $2}'
done | sort -u | while read -r f; do
  mkdir -p "$S/$(dirname "$f")"
  cp "$R/$f" "$S/$f"
done
chroot "$S" depmod "$K"
cp "$INIT" "$S/init"
chmod 755 "$S/init"
if [ -n "$EXTRA" ] && [ -d "$EXTRA" ]; then
  mkdir -p "$S/usr/local/bin"
  cp "$EXTRA"/* "$S/usr/local/bin/"
fi
echo rxeguest > "$S/etc/hostname"
cp "$R/boot/vmlinuz-$K" "$DIR/vmlinuz"
(cd "$S" && find . | cpio -o -H newc --quiet) | zstd -T0 -3 -q -f -o "$OUT.partial"
mv "$OUT.partial" "$OUT"
rm -rf "$S"
