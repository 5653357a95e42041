#!/usr/bin/env bash
# Runs the README's two commands on a Debian 12 system that has nothing installed by hand: a
# minimal root built with mmdebstrap, a clean clone of this repository's HEAD copied into it.
# A machine that already has the packages from earlier work can hide a missing install step;
# this root cannot. Only the host's CA certificates, apt and pip client settings and DNS set-up
# are copied in, so the root reaches the same package registries the host does.
#
# Usage: scripts/check_fresh_machine.sh [WORKDIR]     (as root, or through sudo)
#   WORKDIR  where the root is built (default: a new directory under ${TMPDIR:-/var/tmp});
#            removed afterwards unless KEEP_ROOT=1.
# The CUDA toolkit is no Debian package, so inside the root the cuda backend is left out and
# the GPU tests skip, as on any machine without it. Exit status: 0 when both commands pass.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
suite=bookworm

say() { echo "check_fresh_machine: $*" >&2; }
free_gb() { df -P --block-size=1G "$1" | awk 'NR == 2 { print $4 }'; }  # free space there, in GiB
die() { say "$*"; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || die "needs root (chroot and mounts), and sudo is not installed"
  exec sudo --preserve-env=KEEP_ROOT,TMPDIR "$0" "$@"
fi
command -v git >/dev/null || die "needs git to make a clean clone of the repository"
if ! command -v mmdebstrap >/dev/null; then
  say "installing mmdebstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

# The README's two commands, read from its "Two commands" section, exactly as written.
mapfile -t commands < <(awk '
  /^## / { in_section = ($0 ~ /^## Two commands/) }
  in_section && /^```/ { in_block = !in_block; next }
  in_section && in_block && NF { print }' "$repo/README.md")
((${#commands[@]} == 2)) ||
  die "README.md's 'Two commands' section should hold exactly two commands, found ${#commands[@]}"

work="${1:-}"
if [ -z "$work" ]; then
  work="$(mktemp -d "${TMPDIR:-/var/tmp}/trident-fresh.XXXXXX")"
elif [ -e "$work" ] && [ -n "$(ls -A "$work" 2>/dev/null)" ]; then
  die "$work exists and is not empty; give a new or empty directory"
fi
mkdir -p "$work"
root="$work/root"
mounted=()
cleanup() {
  local m
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
  if [ "${KEEP_ROOT:-0}" = 1 ]; then say "kept the root in $root"; else rm -rf --one-file-system "$work"; fi
}
trap cleanup EXIT

start=$SECONDS
# The root needs about 10 GiB at its peak (PyTorch's wheels alone unpack to 5.5 GB) beside what the
# host's own build and .venv-torch hold; the free space is printed so a full disk reads as one.
say "building a minimal Debian $suite root in $root (host's apt sources; $(free_gb "$work") GiB free there)"
# minbase: dpkg, apt and the essential packages, no recommends. mmdebstrap without a mirror
# argument uses the host's sources.list(.d).
mmdebstrap --quiet --variant=minbase --mode=root "$suite" "$root" >"$work/mmdebstrap.log" 2>&1 ||
  { tail -n 20 "$work/mmdebstrap.log" >&2; die "mmdebstrap failed (log above)"; }
say "root built in $((SECONDS - start)) s"

# What lets the root reach the host's registries: CA certificates (kept by a later
# update-ca-certificates too), apt's and pip's client settings, name resolution.
copy_in() {  # copy_in PATH...: each existing host path to the same place in the root
  local p
  for p in "$@"; do
    [ -e "$p" ] || continue
    mkdir -p "$root$(dirname "$p")"
    cp -a "$p" "$root$p"
  done
}
copy_in /usr/local/share/ca-certificates /etc/ssl/certs/ca-certificates.crt /etc/pip.conf \
  /etc/resolv.conf /etc/hosts
for f in /etc/apt/apt.conf.d/* /etc/apt/auth.conf.d/*; do copy_in "$f"; done

# A clean clone of the commit checked out here: only what is committed, nothing ignored or built.
head="$(git -C "$repo" rev-parse HEAD)"
git clone --quiet --no-hardlinks --no-checkout "$repo" "$root/root/trident"
git -C "$root/root/trident" checkout --quiet --detach "$head"
say "testing commit $head"

for m in proc sys dev dev/pts; do
  mkdir -p "$root/$m"
  case $m in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sysfs "$root/sys" ;;
    *) mount --bind "/$m" "$root/$m" ;;
  esac
  mounted+=("$root/$m")
done

# A login-like environment: nothing of the host's shell but the settings that reach registries.
env_vars=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
          TERM=dumb DEBIAN_FRONTEND=noninteractive)
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY PIP_INDEX_URL \
         PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST PIP_CERT PIP_DEFAULT_TIMEOUT SSL_CERT_FILE \
         REQUESTS_CA_BUNDLE; do
  [ -n "${!v:-}" ] && env_vars+=("$v=${!v}")
done

status=0
for i in "${!commands[@]}"; do
  cmd="${commands[i]}"
  log="$work/command$((i + 1)).log"
  say "running README command $((i + 1)): $cmd"
  t0=$SECONDS
  if chroot "$root" /usr/bin/env -i "${env_vars[@]}" /bin/bash -c "cd /root/trident && $cmd" \
       >"$log" 2>&1 </dev/null; then
    result=passed
  else
    result="FAILED (exit $?)"
    status=1
  fi
  say "command $((i + 1)) $result after $((SECONDS - t0)) s ($(free_gb "$work") GiB free); its summary and last lines:"
  { grep -E '^(setup: |[0-9]+% tests passed|The following tests FAILED|test accuracy)' "$log" || true
    tail -n 8 "$log"; } | sed 's/^/    /' >&2
  [ $status -eq 0 ] || break
done
say "total $((SECONDS - start)) s"
exit $status
