/* test_cuemu_rt.c - checks of the emulated CUDA runtime itself (run with
 * CUEMU_DEVICES=2 by make check): a pointer is freed only on the device
 * that allocated it; stream capture: a captured stream runs nothing, its
 * graph runs the captured work at each launch and drops it once, when the
 * graph and its instantiation are both gone; a wait on a capturing stream
 * is refused and invalidates the capture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuemu_rt.h"

static int failures;

static void expect(int ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
	failures += !ok;
}

static int runs, drops;
static void count_run(void *arg) { (void)arg; runs++; }
static void count_drop(void *arg) { (void)arg; drops++; }

/* the graphs of one stream of device 0 */
static void check_capture(void)
{
	cudaStream_t st;
	cudaGraph_t g = NULL;
	cudaGraphExec_t x = NULL;
	enum cudaStreamCaptureStatus cs;
	float *a = NULL, *b = NULL, h[4] = { 1, 2, 3, 4 }, back[4];
	long launches = cuemu_graph_launches();

	if (cudaSetDevice(0) || cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) ||
	    cudaMalloc((void **)&a, sizeof h) || cudaMalloc((void **)&b, sizeof h) ||
	    cudaMemcpyAsync(a, h, sizeof h, cudaMemcpyHostToDevice, st) || cudaStreamSynchronize(st))
		exit(99);
	expect(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture begins");
	expect(cudaStreamIsCapturing(st, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusActive,
	       "... and the stream says so");
	expect(cudaMemcpyAsync(b, a, sizeof h, cudaMemcpyDeviceToDevice, st) == cudaSuccess &&
	       cuemu_enqueue(st, count_run, count_drop, NULL) == cudaSuccess, "work captured");
	expect(cudaStreamEndCapture(st, &g) == cudaSuccess && g, "capture ends with a graph");
	expect(cudaStreamSynchronize(st) == cudaSuccess && runs == 0, "captured work did not run");
	expect(cudaGraphInstantiate(&x, g, 0) == cudaSuccess && x, "graph instantiated");
	for (int i = 0; i < 3; i++) expect(cudaGraphLaunch(x, st) == cudaSuccess, "graph launched");
	expect(cudaMemcpyAsync(back, b, sizeof back, cudaMemcpyDeviceToHost, st) == cudaSuccess &&
	       cudaStreamSynchronize(st) == cudaSuccess && runs == 3 && !memcmp(back, h, sizeof h),
	       "three launches ran the captured work three times");
	expect(cuemu_graph_launches() - launches == 3, "three graph launches counted");
	expect(cudaGraphDestroy(g) == cudaSuccess && drops == 0, "the instantiation keeps the nodes");
	expect(cudaGraphExecDestroy(x) == cudaSuccess && drops == 1, "... dropped once with it");

	expect(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "a second capture");
	expect(cudaStreamSynchronize(st) == cudaErrorStreamCaptureUnsupported, "a sync while capturing refused");
	(void)cudaGetLastError();
	expect(cudaStreamEndCapture(st, &g) == cudaErrorStreamCaptureInvalidated && !g,
	       "... and the capture invalidated");
	(void)cudaGetLastError();
	expect(cudaStreamIsCapturing(st, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusNone,
	       "the stream no longer captures");
	cudaFree(a);
	cudaFree(b);
	cudaStreamDestroy(st);
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
	check_capture();
	return failures ? 1 : 0;
}
