/* test_cuemu_rt.c - checks of the emulated CUDA runtime itself (run with
 * CUEMU_DEVICES=2 by make check): a pointer is freed only on the device
 * that allocated it. */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

static int failures;

static void expect(int ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
	failures += !ok;
}

int main(void)
{
	int n = 0;
	void *p = NULL, *q = NULL;

	if (setenv("CUEMU_DEVICES", "2", 1)) return 99;
	expect(cudaGetDeviceCount(&n) == cudaSuccess && n == 2, "two emulated devices");
	expect(cudaSetDevice(0) == cudaSuccess && cudaMalloc(&p, 1000) == cudaSuccess && p,
	       "cudaMalloc on device 0");
	expect(cudaSetDevice(1) == cudaSuccess && cudaMalloc(&q, 1000) == cudaSuccess && q,
	       "cudaMalloc on device 1");
	expect(cudaFree(p) == cudaErrorInvalidValue, "cudaFree on device 1 of device 0's pointer refused");
	expect(cudaGetLastError() == cudaErrorInvalidValue, "... and recorded as the last error");
	expect(cudaGetLastError() == cudaSuccess, "... which is not sticky");
	expect(cudaFree(q) == cudaSuccess, "cudaFree on device 1 of its own pointer");
	expect(cudaSetDevice(0) == cudaSuccess && cudaFree(p) == cudaSuccess,
	       "cudaFree on device 0 of its own pointer");
	expect(cudaFree(p) == cudaErrorInvalidValue, "a second cudaFree of it refused");
	(void)cudaGetLastError();
	return failures ? 1 : 0;
}
