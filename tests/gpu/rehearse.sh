#!/usr/bin/env bash
# tests/gpu/rehearse.sh - the bundle's check.sh where none of the project's
# build dependencies are: in ROOT, a minimal Debian made with
#     debootstrap --variant=minbase --include=python3 bookworm ROOT MIRROR
# (MIRROR: the one in /etc/apt/sources.list*), entered with chroot, the
# bundle bind-mounted read-only at /bundle, CUDA's library folder
# (CUDA_LIB, default /usr/local/cuda/targets/x86_64-linux/lib) read-only at
# /usr/local/cuda/lib64 as the lent machine has it, /proc and /dev, and
# OUTDIR at /out.  The CPU stands in for the card (DEVICE=cpu, the tiny_a
# model, short lengths, timeouts 6 times a card's within 900 s); those
# settings may be given in the environment.  As root:
#     tests/gpu/rehearse.sh ROOT BUNDLE OUTDIR
# Exit status: check.sh's.
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: rehearse.sh ROOT BUNDLE OUTDIR" >&2; exit 1; }
root=$(cd "$1" && pwd) bundle=$(cd "$2" && pwd) || exit 1
mkdir -p "$3" && out=$(cd "$3" && pwd) || exit 1
cuda_lib=${CUDA_LIB:-/usr/local/cuda/targets/x86_64-linux/lib}
mounts=()
bind() {   # bind SRC DST [ro]
	mkdir -p "$root$2" && mount --bind "$1" "$root$2" || return 1
	mounts=("$root$2" "${mounts[@]}")
	[ "${3:-}" != ro ] || mount -o remount,bind,ro "$root$2"
}
trap 'for m in "${mounts[@]}"; do umount "$m"; done' EXIT
bind /proc /proc && bind /dev /dev && bind "$bundle" /bundle ro &&
	bind "$cuda_lib" /usr/local/cuda/lib64 ro && bind "$out" /out || exit 1
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp OUT=/out \
	DEVICE=cpu MODEL=/bundle/data/tiny_a/config.json LENGTHS="${LENGTHS:-40 60}" \
	CALIB_LENGTHS="${CALIB_LENGTHS:-40,60}" REF_LENGTH="${REF_LENGTH:-60}" BUDGET="${BUDGET:-900}" \
	STEP_SCALE="${STEP_SCALE:-6}" \
	/bundle/check.sh
