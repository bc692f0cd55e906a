#!/usr/bin/env bash
# Installs what kafkaclone needs on a fresh Debian machine, and nothing twice:
#   - Debian packages named in $KAFKACLONE_APT_PACKAGES (apt-get, only the missing ones)
#   - a virtualenv at .venv with the package (editable) and the extras in $KAFKACLONE_EXTRAS
# Safe to run any number of times. Sourced by scripts/test.sh and scripts/demo.sh.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$repo_root/.venv"
extras="${KAFKACLONE_EXTRAS-test,dev}"
apt_packages="${KAFKACLONE_APT_PACKAGES:-}"

install_apt_packages() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "setup: installing Debian packages: ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
        "${missing[@]}" >/dev/null
}

python_for_venv() {
    for candidate in python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "setup: Python >= 3.11 is required" >&2
    return 1
}

if [ -n "$apt_packages" ]; then
    # shellcheck disable=SC2086
    install_apt_packages $apt_packages
fi

if [ ! -x "$venv/bin/python" ]; then
    "$(python_for_venv)" -m venv "$venv"
fi

# Reinstall only when the declared dependencies or the requested extras change.
stamp="$venv/.kafkaclone-installed-${extras:-base}"
wanted=$(cat "$repo_root/setup.cfg" "$repo_root/pyproject.toml" | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    target="$repo_root"
    [ -n "$extras" ] && target="$repo_root[$extras]"
    echo "setup: installing kafkaclone${extras:+[$extras]} into .venv" >&2
    log="$venv/pip-install.log"
    if ! { "$venv/bin/python" -m pip install --upgrade pip &&
        "$venv/bin/python" -m pip install -e "$target"; } >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "setup: pip install failed (full log: $log)" >&2
        exit 1
    fi
    echo "$wanted" >"$stamp"
fi
