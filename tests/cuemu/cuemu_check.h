/* cuemu_check.h - what the emulator's own test programs (test_cuemu_wmma,
 * test_cuemu_ptx) share: a counted check that prints one line, and device
 * copies of host arrays through the emulated runtime.  Included after
 * cuemu.h (the programs are built with g++ -include cuemu.h). */
#ifndef ESMBATCH_CUEMU_CHECK_H
#define ESMBATCH_CUEMU_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int failures;   /* checks that failed; the program's exit status */

static void expect(int ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
	failures += !ok;
}

/* a device array of n T, a copy of h[0..n) (h NULL: uninitialised) */
template <class T>
static T *dev(const T *h, size_t n)
{
	T *p = NULL;
	if (cudaMalloc((void **)&p, sizeof(T) * n) != cudaSuccess) abort();
	if (h) cudaMemcpyAsync(p, h, sizeof(T) * n, cudaMemcpyHostToDevice, 0);
	return p;
}

/* h[0..n) = d[0..n), the default stream synchronised */
template <class T>
static void get(T *h, const T *d, size_t n)
{
	cudaMemcpyAsync(h, d, sizeof(T) * n, cudaMemcpyDeviceToHost, 0);
	cudaStreamSynchronize(0);
}

#endif
