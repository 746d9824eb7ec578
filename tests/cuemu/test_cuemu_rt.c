/* test_cuemu_rt.c - checks of the emulated CUDA runtime itself (run with
 * CUEMU_DEVICES=2 by make check, and again with CUEMU_COPIES_EARLY=1 by
 * test_cuemu_rt_early.sh): a pointer is freed only on the device that
 * allocated it; stream capture: a captured stream runs nothing, its graph
 * runs the captured work at each launch and drops it once, when the graph
 * and its instantiation are both gone; a wait on a capturing stream is
 * refused and invalidates the capture; cross-stream event waits: a wait
 * runs the event's stream up to the record it was bound to at the call,
 * no further and no later record, and keeps a destroyed event until it
 * ran; the lazy schedule runs a copy only at a sync, the early one as soon
 * as it is at its stream's head, never past a kernel or a pending wait. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

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

/* the names of the log ops run so far, in order */
static char order[32];

/* the op that appends its name (arg: a one-letter string) to order */
static void log_run(void *arg)
{
	size_t n = strlen(order);
	if (n + 1 < sizeof order) {
		order[n] = *(const char *)arg;
		order[n + 1] = '\0';
	}
}

/* queue the log op name on s */
static int log_op(cudaStream_t s, const char *name)
{
	return cuemu_enqueue(s, log_run, NULL, (void *)name) == cudaSuccess;
}

/* 1 when order is exactly want; order emptied */
static int ran(const char *want)
{
	int ok = !strcmp(order, want);
	if (!ok) printf("      ran \"%s\", expected \"%s\"\n", order, want);
	order[0] = '\0';
	return ok;
}

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

/* two streams of device 0, or the test cannot run */
static void two_streams(cudaStream_t *a, cudaStream_t *b)
{
	if (cudaSetDevice(0) || cudaStreamCreateWithFlags(a, cudaStreamNonBlocking) ||
	    cudaStreamCreateWithFlags(b, cudaStreamNonBlocking))
		exit(99);
}

/* a wait, and an event sync, run the event's stream up to its record only */
static void check_wait(void)
{
	cudaStream_t a, b;
	cudaEvent_t ev;

	two_streams(&a, &b);
	if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)) exit(99);
	expect(log_op(a, "X") && cudaEventRecord(ev, a) == cudaSuccess && log_op(a, "Y") &&
	       cudaStreamWaitEvent(b, ev, 0) == cudaSuccess && log_op(b, "Z") && ran(""),
	       "X, record, Y on A; wait, Z on B: nothing ran yet");
	expect(cudaStreamSynchronize(b) == cudaSuccess && ran("XZ"), "syncing B runs X, then Z, not Y");
	expect(cudaStreamSynchronize(a) == cudaSuccess && ran("Y"), "syncing A then runs Y");
	expect(log_op(a, "X") && cudaEventRecord(ev, a) == cudaSuccess && log_op(a, "Y") &&
	       cudaEventSynchronize(ev) == cudaSuccess && ran("X"),
	       "cudaEventSynchronize runs X, recorded before, not Y");
	expect(cudaStreamSynchronize(a) == cudaSuccess && ran("Y"), "... which syncing A runs");
	cudaEventDestroy(ev);
	cudaStreamDestroy(a);
	cudaStreamDestroy(b);
}

/* a wait is bound to the last record as of the call, not a later one */
static void check_generation(void)
{
	cudaStream_t a, b;
	cudaEvent_t ev;

	two_streams(&a, &b);
	if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)) exit(99);
	expect(log_op(a, "1") && cudaEventRecord(ev, a) == cudaSuccess &&
	       cudaStreamWaitEvent(b, ev, 0) == cudaSuccess && log_op(a, "2") &&
	       cudaEventRecord(ev, a) == cudaSuccess && log_op(b, "W") && ran(""),
	       "1, record, 2, record again on A; wait (between the records), W on B");
	expect(cudaStreamSynchronize(b) == cudaSuccess && ran("1W"),
	       "syncing B runs 1 and W, not 2 (recorded after the wait)");
	expect(cudaStreamSynchronize(a) == cudaSuccess && ran("2"), "syncing A then runs 2");
	cudaEventDestroy(ev);
	cudaStreamDestroy(a);
	cudaStreamDestroy(b);
}

/* an event destroyed with a wait and its marker queued: they keep it (the
 * wait still runs X first, where a freed event would read as reached under
 * glibc's M_PERTURB), and it is freed once both ran */
static void check_destroy(void)
{
	cudaStream_t a, b;
	cudaEvent_t ev;
	long live = cuemu_events_live();

	two_streams(&a, &b);
	if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)) exit(99);
	expect(cuemu_events_live() == live + 1, "an event created is live");
	expect(log_op(a, "X") && cudaEventRecord(ev, a) == cudaSuccess &&
	       cudaStreamWaitEvent(b, ev, 0) == cudaSuccess && cudaEventDestroy(ev) == cudaSuccess &&
	       log_op(b, "Z") && ran(""), "X, record on A; wait on B; the event destroyed; Z on B");
	expect(cuemu_events_live() == live + 1, "... the queued wait and marker keep it");
	expect(cudaStreamSynchronize(b) == cudaSuccess && ran("XZ"), "syncing B runs X, then Z");
	expect(cuemu_events_live() == live, "... and frees the event");
	cudaStreamDestroy(a);
	cudaStreamDestroy(b);
}

/* a wait on a capturing stream for an event recorded outside it */
static void check_capture_wait(void)
{
	cudaStream_t a, c;
	cudaEvent_t ev;
	cudaGraph_t g = NULL;

	two_streams(&a, &c);
	if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) || !log_op(a, "X") ||
	    cudaEventRecord(ev, a) || cudaStreamBeginCapture(c, cudaStreamCaptureModeThreadLocal))
		exit(99);
	expect(cudaStreamWaitEvent(c, ev, 0) == cudaErrorStreamCaptureIsolation,
	       "a capturing stream's wait for an outside event refused (isolation)");
	(void)cudaGetLastError();
	expect(cudaStreamEndCapture(c, &g) == cudaErrorStreamCaptureInvalidated && !g,
	       "... and the capture invalidated");
	(void)cudaGetLastError();
	expect(cudaStreamSynchronize(a) == cudaSuccess && ran("X"), "the recording stream runs as before");
	cudaEventDestroy(ev);
	cudaStreamDestroy(a);
	cudaStreamDestroy(c);
}

/* 1 when the device memory d (host memory here) holds h's bytes */
static int holds(const float *d, const float h[4])
{
	return !memcmp(d, h, 4 * sizeof *h);
}

/* when host-to-device copies run: early, at once when at the head of their
 * stream, else (and in the lazy schedule always) at a sync */
static void check_copy_schedule(int early)
{
	cudaStream_t a, s;
	cudaEvent_t ev, never;
	float *d = NULL, h[4] = { 1, 2, 3, 4 };

	two_streams(&a, &s);
	if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) ||
	    cudaEventCreateWithFlags(&never, cudaEventDisableTiming) || cudaMalloc((void **)&d, 16 * sizeof h))
		exit(99);
	expect(cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, s) == cudaSuccess &&
	       holds(d, h) == early, early ? "a copy at an idle stream's head ran on return" :
	                                     "a copy did not run before a sync");
	expect(cudaStreamSynchronize(s) == cudaSuccess && holds(d, h), "... and did by the sync");

	expect(log_op(a, "X") && cudaEventRecord(ev, a) == cudaSuccess &&
	       cudaStreamWaitEvent(s, ev, 0) == cudaSuccess &&
	       cudaMemcpyAsync(d + 4, h, sizeof h, cudaMemcpyHostToDevice, s) == cudaSuccess &&
	       !holds(d + 4, h), "a copy behind a wait for a record not yet run did not run");
	expect(cudaStreamSynchronize(a) == cudaSuccess && ran("X") && holds(d + 4, h) == early,
	       early ? "... and ran once the record's stream ran" : "... nor once the record's stream ran");
	expect(cudaStreamSynchronize(s) == cudaSuccess && holds(d + 4, h), "... and did by its own sync");

	expect(log_op(s, "K") && cudaMemcpyAsync(d + 8, h, sizeof h, cudaMemcpyHostToDevice, s) == cudaSuccess &&
	       !holds(d + 8, h) && ran(""), "a copy behind a queued op (a kernel) did not run");
	expect(cudaStreamSynchronize(s) == cudaSuccess && ran("K") && holds(d + 8, h), "... until the sync");

	expect(cudaStreamWaitEvent(s, never, 0) == cudaSuccess &&
	       cudaMemcpyAsync(d + 12, h, sizeof h, cudaMemcpyHostToDevice, s) == cudaSuccess &&
	       holds(d + 12, h) == early, early ? "a wait for an event never recorded holds no copy back" :
	                                          "a copy behind a wait for an event never recorded did not run");
	expect(cudaStreamSynchronize(s) == cudaSuccess && holds(d + 12, h), "... and did by the sync");
	cudaFree(d);
	cudaEventDestroy(ev);
	cudaEventDestroy(never);
	cudaStreamDestroy(a);
	cudaStreamDestroy(s);
}

int main(void)
{
	int n = 0;
	void *p = NULL, *q = NULL;

	const char *e = getenv("CUEMU_COPIES_EARLY");
	int early = e && atoi(e);

#ifdef M_PERTURB
	mallopt(M_PERTURB, 165);   /* freed memory overwritten: a use after free shows */
#endif
	if (setenv("CUEMU_DEVICES", "2", 1)) return 99;
	printf("the %s schedule\n", early ? "early-copies" : "lazy");
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
	check_wait();
	check_generation();
	check_destroy();
	check_capture_wait();
	check_copy_schedule(early);
	return failures ? 1 : 0;
}
