#!/usr/bin/env bash
# Build the Action's image from this checkout's Dockerfile, unchanged, with podman, and print the
# environment the image tests need (`make image-test` sources it). Installs what it needs itself:
#
# - podman, buildah and runc from Debian, when missing (needs root and apt);
# - the Dockerfile's pinned base when the registry can be reached; where it cannot (a sandbox with
#   only package registries), a stand-in: Debian bookworm minbase with its python3, made with
#   debootstrap and passed as PYTHON_IMAGE, which is the only build argument changed;
# - a runtime wrapper where podman cannot start a container as it is (runc without the OCI
#   rlimits, cgroupfs, host network): needed in gVisor-like sandboxes, never on a normal host.
#
# Usage: bash scripts/image-build.sh ENVFILE    (state in $DITOX_IMAGE_DIR, default /var/tmp/ditox-image)
set -euo pipefail
ENVFILE=${1:?usage: image-build.sh ENVFILE}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=${DITOX_IMAGE_DIR:-/var/tmp/ditox-image}
IMAGE=${DITOX_IMAGE:-localhost/ditox-ci:test}
STANDIN=localhost/ditox-pybase:bookworm
mkdir -p "$STATE"
say() { echo "image-build: $*" >&2; }

missing=()
for tool in podman buildah runc; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} from Debian"
  apt-get update -qq >"$STATE/apt.log" 2>&1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman buildah runc >>"$STATE/apt.log" 2>&1
fi

# The runtime: plain podman first; the wrapper only where that cannot start a container.
conf=""
probe() { podman run --rm --network host "$1" true >/dev/null 2>&1; }
runtime_wrapper() {
  mkdir -p "$STATE/bin"
  cat >"$STATE/bin/runc" <<'EOF'
#!/bin/sh
# runc without the OCI bundle's process.rlimits, which this sandbox refuses to set
bundle=""; prev=""
for a in "$@"; do
  case "$prev" in --bundle|-b) bundle="$a";; esac
  case "$a" in --bundle=*) bundle="${a#--bundle=}";; esac
  prev="$a"
done
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
  python3 -c 'import json,sys; p=sys.argv[1]; c=json.load(open(p)); c.get("process",{}).pop("rlimits",None); json.dump(c,open(p,"w"))' "$bundle/config.json"
fi
exec /usr/sbin/runc "$@"
EOF
  chmod +x "$STATE/bin/runc"
  cat >"$STATE/containers.conf" <<EOF
[containers]
netns = "host"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
[engine.runtimes]
runc = ["$STATE/bin/runc"]
EOF
  conf="$STATE/containers.conf"
}

# The base: the Dockerfile's own, or the stand-in when no registry answers.
pinned=$(sed -n 's/^ARG PYTHON_IMAGE=//p' "$ROOT/Dockerfile")
base_arg=()
if podman pull -q "docker.io/library/$pinned" >/dev/null 2>&1; then
  base=$pinned
else
  base=$STANDIN
  base_arg=(--build-arg "PYTHON_IMAGE=$STANDIN")
  if ! podman image exists "$STANDIN"; then
    command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >>"$STATE/apt.log" 2>&1
    say "the registry cannot be reached: making a Debian bookworm stand-in for $pinned (~80 s)"
    rootfs="$STATE/rootfs"
    rm -rf "$rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
      bookworm "$rootfs" http://deb.debian.org/debian >"$STATE/debootstrap.log" 2>&1
    # a machine whose egress re-signs TLS has its CA here: pip inside the build needs it too
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
      cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
      chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
    fi
    chroot "$rootfs" apt-get clean
    rm -rf "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | podman import --quiet --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$STANDIN" >/dev/null
    rm -rf "$rootfs"
  fi
fi
if ! probe "$base"; then
  runtime_wrapper
  export CONTAINERS_CONF=$conf
  probe "$base" || { say "podman cannot run a container here, even with the runc wrapper"; exit 2; }
  say "podman runs through the runc wrapper (no rlimits, host network): $conf"
fi

say "building $IMAGE from $ROOT/Dockerfile (base $base)"
start=$(date +%s)
podman build --network host "${base_arg[@]}" -t "$IMAGE" "$ROOT" >"$STATE/build.log" 2>&1 \
  || { tail -20 "$STATE/build.log" >&2; say "the build failed; the whole log: $STATE/build.log"; exit 1; }
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
say "built in $(( $(date +%s) - start )) s, $(( size / 1000000 )) MB"
{
  echo "DITOX_IMAGE=$IMAGE"
  echo "DITOX_IMAGE_BASE=$base"
  echo "DITOX_IMAGE_BYTES=$size"
  echo "DITOX_IMAGE_DIR=$STATE"
  if [ -n "$conf" ]; then echo "CONTAINERS_CONF=$conf"; fi
} >"$ENVFILE"
