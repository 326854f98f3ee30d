#!/usr/bin/env bash
# Build the simulated-node base image locally (no registry is reachable):
# debootstrap a minimal Debian bookworm with systemd + python3, then `docker import` it.
# Reused when the image already exists; pass --force to rebuild.
set -euo pipefail
image=${TOPOTUNE_NODE_IMAGE:-local/topotune-node:bookworm}
mirror=${TOPOTUNE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
if [ "${1:-}" != "--force" ] && docker image inspect "$image" >/dev/null 2>&1; then
  echo "node image $image present"
  exit 0
fi
command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }
root=$(mktemp -d /var/tmp/topotune-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "building $image with debootstrap (about a minute) ..."
# numactl: the launch wrapper execs it; procps/iproute2: tests inspect the node.
debootstrap --variant=minbase \
  --include=python3,python3-apt,sudo,procps,iproute2,numactl,systemd,systemd-sysv,dbus \
  bookworm "$root" "$mirror" >/var/tmp/topotune-debootstrap.log 2>&1 \
  || { tail -20 /var/tmp/topotune-debootstrap.log; exit 1; }
# Units that cannot work in an unprivileged container only add noise to `systemctl is-system-running`.
for unit in systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service \
            systemd-remount-fs.service sys-kernel-config.mount sys-kernel-debug.mount \
            getty.target console-getty.service; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
# The render group owns /dev/dri/renderD* and /dev/kfd on ROCm hosts (udev rules of amdgpu/ROCm).
chroot "$root" sh -c 'getent group render >/dev/null || groupadd -r render'
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import --change 'CMD ["/lib/systemd/systemd"]' - "$image" >/dev/null
echo "built $image"
