#!/usr/bin/env bash
# Builds the image the container tests run ZooKeeper and the brokers in, locally (no image
# registry is reachable): a Debian root filesystem made with debootstrap from this machine's
# own apt mirror, with the JRE, ZooKeeper and Python, imported into the local Docker engine;
# then pyspark (the spark extra) in a venv, and the project, installed into that venv from
# wheels built from this checkout, as layers on top.
#
#   bash scripts/build-test-image.sh        prints the image tag (kafkaclone-test:<hash>)
#
# Three caches, so an unchanged tree builds nothing and a code change only re-layers the project:
#   kafkaclone-test-base:<hash of the Debian suite, mirror and package list>
#   kafkaclone-test-spark:<hash of the base tag and the spark extra's requirements>: a venv
#       with pyspark, pyarrow and pandas (hundreds of MB, so kept out of the per-change layer)
#   kafkaclone-test:<hash of the spark tag, the code, the dependency list and the scripts>
# The base root filesystem is also kept as a tarball in $KAFKACLONE_TEST_CACHE (default
# /var/cache/kafkaclone-test), so a pruned engine re-imports it without debootstrap.
# Progress goes to stderr; stdout carries only the tag. Needs root (debootstrap, chroot).
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="${KAFKACLONE_TEST_CACHE:-/var/cache/kafkaclone-test}"
python="${PYTHON:-$repo_root/.venv/bin/python}"
[ -x "$python" ] || python=python3
export DOCKER_BUILDKIT=0  # the classic builder: no BuildKit, no registry lookups

# What the base holds: the JRE and ZooKeeper (Debian's package), Python 3 with venv, and the
# tools the fault helpers use inside a container (iptables, ps, ip).
base_packages="default-jre-headless zookeeper python3 python3-venv iptables procps iproute2"

log() { echo "build-test-image: $*" >&2; }

codename() {
    # shellcheck disable=SC1091
    (. /etc/os-release && echo "${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}")
}

# The mirror this machine's apt uses for its own suite (deb822 .sources or one-line .list),
# read at run time so no mirror host is written into the repository.
apt_mirror() {
    local suite=$1 file
    for file in /etc/apt/sources.list.d/*.sources; do
        [ -f "$file" ] || continue
        awk -v suite="$suite" '
            function flush() {
                if (uris != "" && types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " "))
                    { split(uris, u, " "); print u[1]; found = 1; exit }
                uris = ""; suites = ""; types = ""
            }
            /^[ \t]*$/ { flush(); next }
            /^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
            /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
            /^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
            END { if (!found) flush() }
        ' "$file"
    done | head -n 1 | grep . && return 0
    for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$file" ] || continue
        awk -v suite="$suite" '$1 == "deb" {
            i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
            if ($(i + 1) == suite) { print $i; exit } }' "$file"
    done | head -n 1 | grep . && return 0
    log "no apt source for suite $suite in /etc/apt/sources.list(.d)"
    return 1
}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

build_base() {
    local suite mirror key tag tarball rootfs
    suite=$(codename)
    mirror=$(apt_mirror "$suite")
    key=$(printf '%s\n' "v1" "$suite" "$mirror" "$base_packages" | sha256sum | cut -c1-16)
    tag="kafkaclone-test-base:$key"
    tarball="$cache/base-$key.tar"
    if image_exists "$tag"; then
        log "base image $tag is cached"
        echo "$tag"
        return 0
    fi
    mkdir -p "$cache"
    if [ ! -s "$tarball" ]; then
        rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
        # Unmount whatever is still mounted in the chroot and drop it, also on failure.
        trap 'umount -l "$rootfs/proc" 2>/dev/null || true; rm -rf "$rootfs"; trap - RETURN' RETURN
        log "debootstrap $suite (minbase) from the apt mirror into $rootfs"
        debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 \
            || { tail -n 30 "$cache/debootstrap.log" >&2; return 1; }
        log "installing $base_packages"
        # No service starts inside the chroot.
        printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
        chmod +x "$rootfs/usr/sbin/policy-rc.d"
        mount -t proc proc "$rootfs/proc"
        # The host's name resolution, for apt inside the chroot (Docker supplies its own later).
        cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
        # shellcheck disable=SC2086
        if ! chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
                DEBIAN_FRONTEND=noninteractive sh -c \
                "apt-get -o Acquire::Check-Valid-Until=false update -q && apt-get install -y -q --no-install-recommends $base_packages \
                 && apt-get clean && rm -rf /var/lib/apt/lists/*" >"$cache/apt.log" 2>&1; then
            tail -n 30 "$cache/apt.log" >&2
            return 1
        fi
        umount -l "$rootfs/proc"
        rm -f "$rootfs/usr/sbin/policy-rc.d" "$rootfs/etc/resolv.conf"
        tar -C "$rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    fi
    log "docker import $tarball as $tag"
    docker import "$tarball" "$tag" >/dev/null
    echo "$tag"
}

# The spark extra's requirements, one a line, as setup.cfg lists them.
spark_requirements() {
    awk '/^spark =/ { found = 1; next } found && /^[ \t]+[^ \t]/ { sub(/^[ \t]+/, ""); print; next }
         found { exit }' "$repo_root/setup.cfg"
}

build_spark() {
    local base=$1 key tag context requirements
    requirements=$(spark_requirements)
    [ -n "$requirements" ] || { log "no spark extra in setup.cfg"; return 1; }
    key=$(printf '%s\n' "v1 $base" "$requirements" | sha256sum | cut -c1-16)
    tag="kafkaclone-test-spark:$key"
    if image_exists "$tag"; then
        log "spark layer $tag is cached"
        echo "$tag"
        return 0
    fi
    context=$(mktemp -d /tmp/kafkaclone-test-spark.XXXXXX)
    trap 'rm -rf "$context"; trap - RETURN' RETURN
    mkdir -p "$context/wheels"
    printf '%s\n' "$requirements" >"$context/requirements.txt"
    log "building wheels of the spark extra ($(echo "$requirements" | tr '\n' ' '))"
    "$python" -m pip wheel -q --wheel-dir "$context/wheels" -r "$context/requirements.txt" \
        >"$context/pip.log" 2>&1 || { tail -n 30 "$context/pip.log" >&2; return 1; }
    cat >"$context/Dockerfile" <<EOF
FROM $base
COPY wheels /tmp/wheels
COPY requirements.txt /tmp/requirements.txt
RUN python3 -m venv /opt/kafkaclone/.venv \\
 && /opt/kafkaclone/.venv/bin/pip install -q --no-index --no-cache-dir \\
      --find-links /tmp/wheels -r /tmp/requirements.txt \\
 && rm -rf /tmp/wheels /tmp/requirements.txt
EOF
    log "layering the spark extra onto $base as $tag"
    docker build -q -t "$tag" "$context" >"$context/build.log" 2>&1 \
        || { tail -n 30 "$context/build.log" >&2; return 1; }
    docker image ls --format '{{.Repository}}:{{.Tag}}' kafkaclone-test-spark | grep -vx "$tag" |
        xargs -r docker rmi >/dev/null 2>&1 || true
    echo "$tag"
}

# The files that make up the project layer, relative to the checkout (working tree as it is).
project_files() {
    cd "$repo_root"
    find setup.cfg pyproject.toml README.md kafkaclone scripts config zk_schema \
        -name __pycache__ -prune -o -type f ! -name '*.pyc' -print 2>/dev/null | LC_ALL=C sort
}

build_project() {
    local base=$1 key tag context
    key=$( { echo "v1 $base"; project_files | while IFS= read -r file; do
                printf '%s  ' "$file"; sha256sum <"$repo_root/$file"; done; } |
          sha256sum | cut -c1-16)
    tag="kafkaclone-test:$key"
    if image_exists "$tag"; then
        log "image $tag is cached (code unchanged)"
        echo "$tag"
        return 0
    fi
    context=$(mktemp -d /tmp/kafkaclone-test-image.XXXXXX)
    trap 'rm -rf "$context"; trap - RETURN' RETURN
    mkdir -p "$context/src" "$context/wheels"
    (cd "$repo_root" && project_files | tar -cf - -T -) | tar -C "$context/src" -xf -
    log "building wheels of the checkout and its dependencies"
    "$python" -m pip wheel -q --wheel-dir "$context/wheels" "$context/src" >"$context/pip.log" 2>&1 \
        || { tail -n 30 "$context/pip.log" >&2; return 1; }
    cat >"$context/Dockerfile" <<EOF
FROM $base
COPY wheels /tmp/wheels
RUN /opt/kafkaclone/.venv/bin/pip install -q --no-index --no-cache-dir \\
      --find-links /tmp/wheels kafkaclone \\
 && rm -rf /tmp/wheels
COPY src/scripts /opt/kafkaclone/scripts
COPY src/config /opt/kafkaclone/config
ENV PATH=/opt/kafkaclone/scripts:/usr/sbin:/usr/bin:/sbin:/bin LOG_DIR=/var/log/kafkaclone
WORKDIR /opt/kafkaclone
EOF
    log "layering the project onto $base as $tag"
    docker build -q -t "$tag" "$context" >"$context/build.log" 2>&1 \
        || { tail -n 30 "$context/build.log" >&2; return 1; }
    # Older project layers are dead weight now (an image still in use stays).
    docker image ls --format '{{.Repository}}:{{.Tag}}' kafkaclone-test | grep -vx "$tag" |
        xargs -r docker rmi >/dev/null 2>&1 || true
    echo "$tag"
}

base=$(build_base)
spark=$(build_spark "$base")
build_project "$spark"
