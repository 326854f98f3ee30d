#!/usr/bin/env bash
# Extract the collections the tests need (community.docker and its dependency, ansible.posix) from the
# `ansible` community wheel on PyPI: Ansible Galaxy is not reachable, PyPI is.
# usage: scripts/vendor-collections.sh DEST_DIR [ANSIBLE_PACKAGE_VERSION]
set -euo pipefail
dest=${1:?usage: vendor-collections.sh DEST_DIR [VERSION]}
ver=${2:-12.3.0}   # ansible 12.x bundles ansible-core 2.19.x collections
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "ansible==$ver"
"$py" - "$tmp/ansible-$ver-py3-none-any.whl" "$dest" <<'PY'
import sys
import zipfile

whl, dest = sys.argv[1:3]
keep = (
    "ansible_collections/community/docker/",
    "ansible_collections/community/library_inventory_filtering_v1/",
    "ansible_collections/ansible/posix/",
)
with zipfile.ZipFile(whl) as z:
    z.extractall(dest, [m for m in z.namelist() if m.startswith(keep)])
PY
