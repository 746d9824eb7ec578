#!/usr/bin/env bash
# tests/gpu/bundle.sh - the GPU check as one self-contained folder, for a
# lent machine that cannot build (no autotools, no -dev packages, no
# package registry): `make gpu-bundle`, or
#     tests/gpu/bundle.sh BUILDDIR SRCDIR OUTDIR
# with BUILDDIR a CUDA build (configure --with-cuda, cmocka found) whose
# esmbatch, tools/mkweights and tests/test_cuda_ops are built.  OUTDIR
# (replaced) then holds
#     check.sh torch_ref.py check_dump.py esmfold_ref.py   the scripts
#     esmbatch mkweights test_cuda_ops                    the programs (no
#                                                         debug info)
#     data/manifest_esmfold_v1.json data/tiny_{a,b}/      what check.sh reads
#     lib/        every shared library the programs load that is not glibc's,
#                 libgcc_s, libstdc++ or CUDA's (htslib and what it pulls in,
#                 jansson, libzip, OpenBLAS, cmocka, libgomp, ...)
#     BUNDLE      what built it, and the list of lib/
# and OUTDIR.tar.gz, the same folder as one archive: what travels to the
# lent machine (the device tool carries at most 64 MiB, the working tree's
# ~20 MiB included; the folder itself is ~58 MiB, ~98 MiB in a build with
# oneDNN, whose library is 38 MiB; gzip takes it to ~20 MiB, ~31 MiB),
# unpacked there with `tar xzf OUTDIR.tar.gz` (tar and gzip are on every
# such machine).
# The programs get RUNPATH $ORIGIN/lib followed by CUDA's usual folders,
# every library of lib/ RUNPATH $ORIGIN (a RUNPATH is not inherited by
# the libraries a program loads); CUDA's own libraries (cudart, cuBLAS,
# cuBLASLt) are the lent machine's, found by check.sh.  Needs ldd and
# patchelf (Debian's patchelf package).  `bundle.sh --allowed` prints the
# names (an extended regular expression) of the libraries left out.
# Exit 0, 1 after one line on
# stderr (a program missing, the bundle over BUNDLE_MAX_MIB, default 120, or
# its archive, what travels, over BUNDLE_MAX_GZ_MIB, default 48: the device
# tool carries at most 64 MiB, and the kernels of 0.2.0 took the archive
# of a oneDNN build past 36 in a distcheck build).
set -euo pipefail

# what the lent machine has: glibc, the compiler's runtime, CUDA's libraries
# and the driver (tests/gpu/test_bundle.sh holds the bundle to this list)
allowed='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so|libgcc_s\.so|libstdc\+\+\.so|libcuda\.so|libcudart\.so|libcublas\.so|libcublasLt\.so)'
[ "${1:-}" = --allowed ] && { echo "$allowed"; exit 0; }
[ $# -eq 3 ] || { echo "usage: bundle.sh BUILDDIR SRCDIR OUTDIR" >&2; exit 1; }
build=$1 src=$2 out=$3
max_mib=${BUNDLE_MAX_MIB:-120} max_gz_mib=${BUNDLE_MAX_GZ_MIB:-48}
die() { echo "bundle.sh: $*" >&2; exit 1; }

command -v patchelf >/dev/null || die "patchelf not found (apt-get install patchelf)"
progs="esmbatch tools/mkweights tests/test_cuda_ops"
for p in $progs; do
	[ -x "$build/$p" ] || die "$build/$p not built (make && make check TESTS=)"
done
ldd "$build/esmbatch" | grep 'libcudart' >/dev/null || die "$build/esmbatch is not a CUDA build"   # grep reads it all: no SIGPIPE for ldd under pipefail

rm -rf "$out"
mkdir -p "$out/lib" "$out/data"
for p in $progs; do
	cp "$build/$p" "$out/"
	strip --strip-debug "$out/$(basename "$p")"   # symbols kept; about 2.4 MB less
done
cp "$src/tests/gpu/check.sh" "$src/tests/gpu/torch_ref.py" "$src/tools/check_dump.py" \
	"$src/bench/esmfold_ref.py" "$out/"
cp "$src/tests/data/manifest_esmfold_v1.json" "$out/data/"
for fx in tiny_a tiny_b; do
	mkdir -p "$out/data/$fx"
	cp "$src/tests/data/$fx/sequences.fa" "$src/tests/data/$fx/weights.safetensors" \
		"$src/tests/data/$fx/config.json" \
		"$src/tests/data/$fx/expected.safetensors" "$src/tests/data/$fx/expected.json" \
		"$out/data/$fx/"
done

for p in $progs; do
	ldd "$build/$p" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
	grep -Eq "$allowed" <<< "$name" && continue
	cp -L "$path" "$out/lib/$name"
done
for p in $progs; do
	patchelf --set-rpath '$ORIGIN/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib' \
		"$out/$(basename "$p")"
done
for l in "$out"/lib/*; do
	chmod u+w "$l"
	patchelf --set-rpath '$ORIGIN' "$l"
done

{
	echo "esmbatch GPU check bundle: run ./check.sh (see its header)"
	{ "$build/esmbatch" version 2>/dev/null || true; } | head -3   # its SIGPIPE no failure
	echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(ldd --version | head -1)"
	echo "lib/:"
	(cd "$out/lib" && ls -l | awk 'NR > 1 { printf "  %-24s %10d\n", $9, $5 }')
} > "$out/BUNDLE"

bytes=$(du -sb "$out" | cut -f1)
[ "$bytes" -le $(( max_mib << 20 )) ] ||
	die "$out is $(( bytes >> 20 )) MiB, over $max_mib MiB"
tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
gz=$(stat -c %s "$out.tar.gz")
[ "$gz" -le $(( max_gz_mib << 20 )) ] ||
	die "$out.tar.gz is $(( gz >> 20 )) MiB, over $max_gz_mib MiB"
echo "bundle.sh: $out, $bytes bytes ($(( bytes >> 20 )) MiB), $(ls "$out/lib" | wc -l) libraries;" \
	"$out.tar.gz, $gz bytes ($(( gz >> 20 )) MiB)"
