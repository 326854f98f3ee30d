#!/usr/bin/env bash
# Build the simulated node image with Prometheus' Debian packages (prometheus-node-exporter; prometheus with
# promtool) on top of the base node image (sim/image/build-image.sh), for the node-local drift metrics tests
# (tests/integration/test_drift_exporter.py) and bench/drift_exporter_bench.py. A separate image, so the base image
# (and its version, which every other test uses) does not change. The packages' units are left disabled: the tests
# configure and start them.
# Reused when present and built from the current base image; pass --force to rebuild.
set -euo pipefail
base=${TOPOTUNE_NODE_IMAGE:-local/topotune-node:bookworm}
image=${TOPOTUNE_PROMETHEUS_NODE_IMAGE:-local/topotune-node-prometheus:bookworm}
# Bump when the content below changes.
version=1
base_id=$(docker image inspect -f '{{ .Id }}' "$base")
have=$(docker image inspect -f '{{ index .Config.Labels "topotune.prometheus-image.version" }} {{ index .Config.Labels "topotune.base-image" }}' "$image" 2>/dev/null || true)
if [ "${1:-}" != "--force" ] && [ "$have" = "$version $base_id" ]; then
  echo "node image $image (version $version) present"
  exit 0
fi
echo "building $image from $base (Debian packages prometheus, prometheus-node-exporter) ..."
context=$(mktemp -d /var/tmp/topotune-prometheus-image.XXXXXX)
trap 'rm -rf "$context"' EXIT
cat > "$context/Dockerfile" <<DOCKERFILE
FROM $base
# The base image has no package lists (removed after debootstrap); the build container has the host's network, the
# nodes started from the image have none.
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus prometheus-node-exporter \\
 && systemctl disable --quiet prometheus.service prometheus-node-exporter.service \\
 && rm -rf /var/cache/apt/archives/*.deb /var/lib/apt/lists/*
LABEL topotune.prometheus-image.version=$version topotune.base-image=$base_id
DOCKERFILE
# the legacy builder: this Docker has no buildx, and BuildKit is not needed for one RUN
if ! DOCKER_BUILDKIT=0 docker build --network host -t "$image" "$context" >"$context/build.log" 2>&1; then
  tail -30 "$context/build.log"
  echo "building $image failed" >&2
  exit 1
fi
echo "built $image"
