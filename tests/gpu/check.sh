#!/usr/bin/env bash
# tests/gpu/check.sh - the GPU proof of the CUDA backend, for a host with a
# GPU.  Run from anywhere: tests/gpu/check.sh
#
#  0. builds with CUDA (configure --with-cuda --with-cuda-arch=$CUDA_ARCH,
#     default 90) in $BUILD_DIR (default /tmp/esmbatch-gpu), or in the
#     source tree when that is already configured there; a checkout without
#     configure is built from an esmbatch-*.tar.gz (`make dist`) in its root,
#     else after autoreconf;
#  1. runs tests/test_cuda_ops: every backend op on CUDA against the CPU
#     backend, random inputs of awkward shapes, an NMSE bound per op (fp32;
#     the GEMMs also with TF32 and bf16 inputs);
#  2. folds the sequences of both fixtures with --devices cpu and --devices
#     cuda (--precision fp32) and compares every PDB's coordinates and
#     B-factors (pLDDT) within $PDB_TOL (default 0.05: the PDB columns are
#     rounded to 0.001 and 0.01).
#
# Exit status: 0 all passed, 77 no GPU (nothing checked), else failed.
set -uo pipefail

srcdir=$(cd "$(dirname "$0")/../.." && pwd)
arch=${CUDA_ARCH:-90}
tol=${PDB_TOL:-0.05}
jobs=$(nproc 2>/dev/null || echo 4)

say() { printf '== %s\n' "$*"; }

if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi -L || true
else
	say "nvidia-smi not found (the test program decides whether a GPU is present)"
fi

# --- 0. build ---
# A tree without configure (a git checkout) is built from a `make dist`
# tarball beside it when there is one, else after autoreconf.
if [ ! -x "$srcdir/configure" ]; then
	tarball=$(ls -t "$srcdir"/esmbatch-*.tar.gz 2>/dev/null | head -1)
	if [ -n "$tarball" ]; then
		say "building from $tarball"
		mkdir -p /tmp/esmbatch-gpu-src &&
			tar -xzf "$tarball" -C /tmp/esmbatch-gpu-src --strip-components=1 ||
			{ echo "check.sh: cannot unpack $tarball"; exit 1; }
		srcdir=/tmp/esmbatch-gpu-src
	else
		say "autoreconf"
		(cd "$srcdir" && autoreconf -fi) || { echo "check.sh: autoreconf failed"; exit 1; }
	fi
fi
if [ -f "$srcdir/config.status" ]; then
	build=$srcdir
else
	build=${BUILD_DIR:-/tmp/esmbatch-gpu}
fi
mkdir -p "$build" && cd "$build" || exit 1
if ! grep -q '^D\["HAVE_CUDA"\]' config.status 2>/dev/null ||
   ! grep -q "arch=compute_$arch" config.status 2>/dev/null; then
	say "configure --with-cuda --with-cuda-arch=$arch in $build"
	"$srcdir/configure" --with-cuda --with-cuda-arch="$arch" >configure.out 2>&1 ||
		{ tail -30 configure.out; echo "check.sh: configure failed"; exit 1; }
fi
say "make -j$jobs"
t0=$(date +%s)
make -j"$jobs" >make.out 2>&1 && make -j"$jobs" check TESTS= >>make.out 2>&1 ||
	{ tail -40 make.out; echo "check.sh: build failed"; exit 1; }
say "built in $(( $(date +%s) - t0 )) s"
./esmbatch version

# --- 1. every op, CUDA against CPU ---
say "tests/test_cuda_ops"
./tests/test_cuda_ops
rc=$?
if [ $rc -eq 77 ]; then
	say "no CUDA device: skipped"
	exit 77
fi
[ $rc -eq 0 ] || { echo "check.sh: test_cuda_ops failed ($rc)"; exit 1; }

# --- 2. both fixtures folded on CPU and CUDA ---
# max |difference| of the x, y, z and B-factor columns of two PDB files with
# the same atoms; "atoms differ" when they do not line up
pdb_diff() {
	awk '/^ATOM|^HETATM/ {
		k = substr($0, 13, 15); x = substr($0, 31, 8); y = substr($0, 39, 8);
		z = substr($0, 47, 8); b = substr($0, 61, 6)
		if (FNR == NR) { n1++; K[n1] = k; X[n1] = x; Y[n1] = y; Z[n1] = z; B[n1] = b; next }
		n2++
		if (K[n2] != k) bad = 1
		d = x - X[n2]; if (d < 0) d = -d; if (d > m) m = d
		d = y - Y[n2]; if (d < 0) d = -d; if (d > m) m = d
		d = z - Z[n2]; if (d < 0) d = -d; if (d > m) m = d
		d = b - B[n2]; if (d < 0) d = -d; if (d > m) m = d
	}
	END { if (bad || n1 != n2 || n1 == 0) print "atoms differ"; else printf "%.4f\n", m }' "$1" "$2"
}

fail=0
for fx in tiny_a tiny_b; do
	d=$srcdir/tests/data/$fx
	out=$build/gpu-check/$fx
	rm -rf "$out"
	for dev in cpu cuda; do
		t0=$(date +%s%N)
		./esmbatch fold -i "$d/sequences.fa" -o "$out/$dev" --weights "$d/weights.safetensors" \
			--devices "$dev" --precision fp32 -q
		frc=$?
		say "$fx on $dev: exit $frc, $(( ($(date +%s%N) - t0) / 1000000 )) ms"
		[ $frc -eq 0 ] || fail=1
	done
	for p in "$out"/cpu/*.pdb; do
		[ -f "$p" ] || { echo "check.sh: $fx: no PDB from the CPU run"; fail=1; break; }
		g=$out/cuda/$(basename "$p")
		if [ ! -f "$g" ]; then
			echo "  $(basename "$p"): missing from the CUDA run"; fail=1; continue
		fi
		m=$(pdb_diff "$p" "$g")
		ok=$(awk -v m="$m" -v t="$tol" 'BEGIN { print (m ~ /^[0-9.]+$/ && m <= t) ? "ok" : "FAIL" }')
		echo "  $(basename "$p"): max |cpu - cuda| $m ($ok, tol $tol)"
		[ "$ok" = ok ] || fail=1
	done
done

if [ $fail -ne 0 ]; then
	echo "check.sh: FAILED"
	exit 1
fi
say "all GPU checks passed"
