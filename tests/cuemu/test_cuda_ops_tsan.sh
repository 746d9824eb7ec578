#!/bin/sh
# test_cuda_ops_tsan.sh - test_cuda_ops on the emulator under ThreadSanitizer
# (tests/test_cuda_ops_tsan): every CUDA thread a TSan fiber whose switches
# do not synchronise, __syncthreads and __syncwarp the only orderings
# within a block (tests/cuemu/README), so a missing barrier in a kernel is
# a data race that TSan reports, naming both lines, and fails the test.
prog=./tests/test_cuda_ops_tsan
if ! test -x "$prog"; then
	echo "cuemu: no -fsanitize=thread with these compilers at configure time: TSan race check of the kernels skipped"
	exit 77
fi
# the CPU reference single-threaded: libgomp and OpenBLAS are not
# instrumented, and their own synchronisation is invisible to TSan
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
TSAN_OPTIONS="exitcode=66 history_size=4 ${TSAN_OPTIONS:-}"
export OMP_NUM_THREADS OPENBLAS_NUM_THREADS TSAN_OPTIONS
out=${TMPDIR:-/tmp}/cuemu_tsan.$$
trap 'rm -f "$out"' EXIT
"$prog" >"$out" 2>&1
rc=$?
# some kernels lay out memory where this TSan cannot map its shadow; it
# runs without address-space randomisation
if [ $rc -ne 0 ] && grep -q "unexpected memory mapping" "$out" && command -v setarch >/dev/null; then
	echo "cuemu: TSan rejects this address-space layout: rerun under setarch -R"
	setarch "$(uname -m)" -R "$prog" >"$out" 2>&1
	rc=$?
fi
cat "$out"
if grep -q "WARNING: ThreadSanitizer" "$out"; then
	echo "cuemu: ThreadSanitizer reported a race (above): a missing __syncthreads or __syncwarp?"
	[ $rc -ne 0 ] || rc=1
fi
exit $rc
