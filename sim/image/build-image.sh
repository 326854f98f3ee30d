#!/usr/bin/env bash
# Build the simulated-node base image locally (no registry is reachable):
# debootstrap a minimal Debian bookworm with systemd + python3 (+ Slurm 22.05 and munge for the Slurm
# integration tests), then `docker import` it.
# Reused when the image already exists; pass --force to rebuild.
set -euo pipefail
image=${TOPOTUNE_NODE_IMAGE:-local/topotune-node:bookworm}
mirror=${TOPOTUNE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Bump when the image content changes: an image with another version is rebuilt.
version=5
have=$(docker image inspect -f '{{ index .Config.Labels "topotune.image.version" }}' "$image" 2>/dev/null || true)
if [ "${1:-}" != "--force" ] && [ "$have" = "$version" ]; then
  echo "node image $image (version $version) present"
  exit 0
fi
command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }
root=$(mktemp -d /var/tmp/topotune-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
# mktemp made it 0700: the package scripts that run as a system user (munge's `su munge -c mungekey`) must
# traverse the chroot's /.
chmod 0755 "$root"
echo "building $image with debootstrap (about a minute) ..."
# numactl: the launch wrapper execs it; procps/iproute2: tests inspect the node.
# slurmctld/slurmd/slurm-client/munge: a one-node Slurm (tests/integration/slurm_node.py); hwloc-nox: lstopo
# shows what hwloc (Slurm's topology source) reads, e.g. under HWLOC_FSROOT=/sim.
# openmpi-bin: Open MPI's mpirun launches the benchmark's ranks (knowledge/acceptance.yml collective.templates.mpirun;
# tests/integration/test_benchmark_compare.py runs the stand-in simulator as each rank under it).
# faketime: a node whose clock is years off (libfaketime under the node's Python); e2fsprogs: chattr/lsattr for the
# immutable-file fault (tests/integration/test_node_faults.py).
debootstrap --variant=minbase \
  --include=python3,python3-apt,sudo,procps,iproute2,numactl,systemd,systemd-sysv,dbus,munge,slurmd,slurmctld,slurm-client,hwloc-nox,openmpi-bin,faketime,e2fsprogs \
  bookworm "$root" "$mirror" >/var/tmp/topotune-debootstrap.log 2>&1 \
  || { tail -20 /var/tmp/topotune-debootstrap.log
       # the package scripts' own errors (removed with $root on exit)
       if [ -f "$root/debootstrap/debootstrap.log" ]; then
         cp "$root/debootstrap/debootstrap.log" /var/tmp/topotune-debootstrap-chroot.log
         echo "chroot log: /var/tmp/topotune-debootstrap-chroot.log"; tail -30 /var/tmp/topotune-debootstrap-chroot.log
       fi
       exit 1; }
# Units that cannot work in an unprivileged container only add noise to `systemctl is-system-running`.
for unit in systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service \
            systemd-remount-fs.service sys-kernel-config.mount sys-kernel-debug.mount \
            getty.target console-getty.service; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
# Slurm and munge are installed, not running: the tests write slurm.conf and start them (the package
# scripts enabled them for boot). munge.key is the one the package generated in this build.
chroot "$root" systemctl disable --quiet munge.service slurmd.service slurmctld.service
# The render group owns /dev/dri/renderD* and /dev/kfd on ROCm hosts (udev rules of amdgpu/ROCm).
chroot "$root" sh -c 'getent group render >/dev/null || groupadd -r render'
# What the amdgpu udev rules do on a real node (KERNEL=="kfd"/"renderD*", GROUP="render", MODE="0660"),
# applied to the profile's simulated device files (regular files under /sim/dev). Re-run it after
# rebuilding /sim in place: systemctl restart topotune-sim-udev.
cat > "$root/etc/systemd/system/topotune-sim-udev.service" <<'UNIT'
[Unit]
Description=Simulated udev rules: GPU device files of the hardware profile belong to render, mode 0660
ConditionPathExists=/sim/dev/kfd

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'chgrp render /sim/dev/kfd /sim/dev/dri/renderD* && chmod 0660 /sim/dev/kfd /sim/dev/dri/renderD*'

[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/topotune-sim-udev.service "$root/etc/systemd/system/multi-user.target.wants/topotune-sim-udev.service"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import --change 'CMD ["/lib/systemd/systemd"]' \
  --change "LABEL topotune.image.version=$version" - "$image" >/dev/null
echo "built $image"
