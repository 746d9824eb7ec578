/* cuemu_rt.c - the CUDA runtime subset src/backend/cuda.c and the kernels call,
 * on the CPU: CUEMU_DEVICES devices (default 1) of CUEMU_MEM bytes each
 * (default 16G; a comma list gives each device its own, e.g. 2G,8G),
 * allocations NaN-filled and refused beyond the device's size
 * (CUEMU_FAIL_MALLOC=N also refuses the Nth cudaMalloc of the process),
 * streams whose work waits until a synchronising call (cudaStreamSynchronize,
 * counted; cudaEventSynchronize on an event recorded in the stream), pinned
 * host memory as plain host memory, the host thread's
 * last error and the sticky error of a device (CUEMU_FAIL_LAUNCH=N: the Nth
 * kernel launch fails with cudaErrorLaunchFailure, sticky, or with the
 * error CUEMU_FAIL_ERROR=CODE, e.g. 999 cudaErrorUnknown; N@D: the Nth
 * launch on device D), CUEMU_CC=86[,90...] gives each device its compute
 * capability (default 90), CUEMU_REVERSE=1
 * runs blocks and threads in reverse order, stream capture into graphs
 * (cudaStreamBeginCapture: the stream's work is appended to a graph, not
 * queued; waits on a capturing stream are refused and invalidate the
 * capture, as on a card; a launched graph runs its nodes in order, as one
 * queued operation), CUEMU_TRACE=1 logs every
 * cudaMalloc, cudaFree and kernel launch (number, size or name, device) on
 * stderr, CUEMU_EXPF_ULP=N moves the kernels' expf N ulp up (cuemu_expf),
 * cudaStreamWaitEvent (the waiting stream's work after it runs its event's
 * stream up to that record only), CUEMU_COPIES_EARLY=1 runs copies, markers
 * and satisfied waits as soon as they reach their stream's head (kernels
 * stay lazy: a copy that does not wait for a kernel still reading its
 * destination overwrites it first). */

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuemu_rt.h"

#define CUEMU_MAX_DEVICES 16
#define CUEMU_SMEM_DEFAULT (48 << 10)    /* dynamic shared memory without opt-in */
#define CUEMU_SMEM_OPTIN 232448          /* sm_90's opt-in maximum */

/* what a queued operation is to the early-copies schedule (CUEMU_COPIES_EARLY) */
typedef enum {
	CUEMU_OP_LAZY,    /* a kernel, GEMM or graph launch: runs at a synchronising call */
	CUEMU_OP_EARLY,   /* a copy or an event marker: may also run once at its stream's head */
	CUEMU_OP_WAIT,    /* a wait (arg: cuemu_mark_t): likewise, once its event reached the record */
} cuemu_op_kind_t;

/* one queued operation */
typedef struct cuemu_op {
	void          (*run)(void *);
	void          (*drop)(void *);
	void           *arg;
	cuemu_op_kind_t kind;
	struct cuemu_op *next;
} cuemu_op_t;

struct CUstream_st {
	int              dev;
	cuemu_op_t      *head, *tail;
	struct CUgraph_st *capture;  /* the graph being captured, or NULL */
	struct CUstream_st *next;   /* the device's streams */
};

/* a captured graph: its nodes, in capture order (a linear chain: one
 * stream), run at each launch and dropped once, when the graph, every
 * instantiation and every launch still queued are gone (refs) */
struct CUgraph_st {
	cuemu_op_t *head, *tail;
	int         refs;
	int         invalid;   /* a call the capture refuses was made */
	int         dev;       /* the captured stream's */
};

struct CUgraphExec_st {
	struct CUgraph_st *g;
};

/* an event: each cudaEventRecord outside a capture is a record, numbered
 * gen, whose marker in the stream's queue raises done_gen to it when run
 * (or dropped unrun); the event has reached record g once done_gen >= g.
 * A card tracks each record apart: here the later of two records pending
 * on two streams at once, run first, also satisfies the earlier's waits
 * (the backend records an event on one stream). */
struct CUevent_st {
	struct CUstream_st *stream;     /* of the last record, or NULL */
	unsigned long       gen;        /* records so far: the last one's number */
	unsigned long       done_gen;   /* the highest record whose marker has run */
	int                 refs;       /* the creator's until cudaEventDestroy, one per queued marker or wait */
};

/* one record of an event: its marker's argument, and a wait's (bound to
 * the last record as of cudaStreamWaitEvent) */
typedef struct {
	struct CUevent_st  *ev;
	unsigned long       gen;
	struct CUstream_st *stream;     /* the record's: a wait runs it up to the marker */
} cuemu_mark_t;

typedef struct {
	size_t              mem, used;
	int                 cc;         /* compute capability, 10 * major + minor */
	long                nlaunch;    /* kernel launches on the device */
	cudaError_t         sticky;
	struct CUstream_st  legacy;     /* stream 0 */
	struct CUstream_st *streams;
} cuemu_dev_t;

typedef struct {
	char  *p;
	size_t n;
	int    dev;
} cuemu_alloc_t;

/* a kernel's cudaFuncSetAttribute(MaxDynamicSharedMemorySize) */
typedef struct {
	const void *func;
	int         smem;
} cuemu_fattr_t;

static struct {
	pthread_once_t  once;
	pthread_mutex_t lock;      /* everything below, and the queues */
	pthread_mutex_t exec;      /* one host thread runs queued work at a time */
	int             ndev, reverse, trace, fail_dev, expf_ulp;
	int             copies_early; /* CUEMU_COPIES_EARLY: the early-copies schedule */
	long            fail_malloc, fail_launch, nmalloc, nlaunch;
	long            nsync;        /* cudaStreamSynchronize calls (cuemu_stream_syncs) */
	long            nsetdev;      /* cudaSetDevice calls (cuemu_set_devices) */
	long            ngraph;       /* cudaGraphLaunch calls (cuemu_graph_launches) */
	long            nevent;       /* events not yet freed (cuemu_events_live) */
	cudaError_t     fail_error;   /* what the failed launch leaves */
	cuemu_dev_t     dev[CUEMU_MAX_DEVICES];
	cuemu_alloc_t  *alloc;
	int             nalloc, alloc_cap;
	long            nfree;        /* cudaFree calls: the age of cuemu_in_alloc's cache */
	cuemu_fattr_t  *fattr;
	int             nfattr;
} rt = { .once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER,
         .exec = PTHREAD_MUTEX_INITIALIZER };

static __thread int cur_dev;
static __thread cudaError_t last_error;

/* "16G", "512M", ...: bytes, 0 when unreadable */
static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	switch (*end) {
	case 'k': case 'K': v *= 1024.0; break;
	case 'm': case 'M': v *= 1048576.0; break;
	case 'g': case 'G': v *= 1073741824.0; break;
	}
	return v > 0 ? (size_t)v : 0;
}

static void rt_init(void)
{
	const char *e = getenv("CUEMU_DEVICES"), *m = getenv("CUEMU_MEM"), *cc = getenv("CUEMU_CC");
	size_t mem = 16ull << 30;
	int ccv = 90;

	rt.ndev = e ? atoi(e) : 1;
	if (rt.ndev < 0) rt.ndev = 0;
	if (rt.ndev > CUEMU_MAX_DEVICES) rt.ndev = CUEMU_MAX_DEVICES;
	for (int d = 0; d < rt.ndev; d++) {
		if (m && *m) {
			mem = parse_size(m);
			m = strchr(m, ',') ? strchr(m, ',') + 1 : NULL;
		}
		if (cc && *cc) {
			ccv = atoi(cc);
			cc = strchr(cc, ',') ? strchr(cc, ',') + 1 : NULL;
		}
		rt.dev[d].mem = mem;
		rt.dev[d].cc = ccv;
		rt.dev[d].legacy.dev = d;
	}
	rt.reverse = (e = getenv("CUEMU_REVERSE")) && atoi(e);
	rt.fail_malloc = (e = getenv("CUEMU_FAIL_MALLOC")) ? atol(e) : 0;
	rt.fail_launch = (e = getenv("CUEMU_FAIL_LAUNCH")) ? atol(e) : 0;
	rt.fail_dev = e && strchr(e, '@') ? atoi(strchr(e, '@') + 1) : -1;
	rt.fail_error = (e = getenv("CUEMU_FAIL_ERROR")) ? (cudaError_t)atoi(e) : cudaErrorLaunchFailure;
	rt.trace = (e = getenv("CUEMU_TRACE")) && atoi(e);
	rt.expf_ulp = (e = getenv("CUEMU_EXPF_ULP")) ? atoi(e) : 0;
	rt.copies_early = (e = getenv("CUEMU_COPIES_EARLY")) && atoi(e);
}

/* e, recorded as the host thread's last error unless it is cudaSuccess */
static cudaError_t ret(cudaError_t e)
{
	if (e != cudaSuccess) last_error = e;
	return e;
}

/* the sticky error of the current device, or cudaSuccess; rt_init done */
static cudaError_t sticky(void)
{
	pthread_once(&rt.once, rt_init);
	return cur_dev < rt.ndev ? rt.dev[cur_dev].sticky : cudaErrorNoDevice;
}

static struct CUstream_st *stream_of(cudaStream_t s)
{
	return s ? s : &rt.dev[cur_dev].legacy;
}

/* 1 when s is capturing: a wait on it is refused and the capture
 * invalidated, as on a card */
static int capture_refuse(struct CUstream_st *s)
{
	pthread_mutex_lock(&rt.lock);
	struct CUgraph_st *g = s->capture;
	if (g) g->invalid = 1;
	pthread_mutex_unlock(&rt.lock);
	if (g) fprintf(stderr, "cuemu: a wait on a capturing stream refused\n");
	return g != NULL;
}

/* 1 when the event of m has reached m's record; rt.lock held */
static int mark_reached(const cuemu_mark_t *m)
{
	return m->ev->done_gen >= m->gen;
}

/* 1 when op may run at its stream's head before a synchronising call
 * (CUEMU_COPIES_EARLY): a copy, a marker, a wait whose event reached the
 * record; rt.lock held */
static int op_early(const cuemu_op_t *op)
{
	return op->kind == CUEMU_OP_EARLY || (op->kind == CUEMU_OP_WAIT && mark_reached(op->arg));
}

/* the head of s, popped, if stream_run goes on with it: until (if any) not
 * reached yet (s untouched otherwise), and with early set a head that may
 * run early; else NULL.  rt.lock held */
static cuemu_op_t *stream_pop(struct CUstream_st *s, const cuemu_mark_t *until, int early)
{
	if (until && mark_reached(until)) return NULL;
	cuemu_op_t *op = s->head;
	if (!op || (early && !op_early(op))) return NULL;
	if (!(s->head = op->next)) s->tail = NULL;
	return op;
}

/* run the queued work of s in order (a device with a sticky error drops it
 * instead) until the queue is empty, until's event has reached its record,
 * or, with early set, the head may not run early; the number of ops taken.
 * rt.exec held: a wait runs its event's stream inside another stream's run,
 * and a wait is only ever bound to a record queued before it, so this
 * recursion ends.  Takes rt.lock for each pop. */
static int stream_run(struct CUstream_st *s, const cuemu_mark_t *until, int early)
{
	for (int n = 0;; n++) {
		pthread_mutex_lock(&rt.lock);
		cuemu_op_t *op = stream_pop(s, until, early);
		cudaError_t st = op ? rt.dev[s->dev].sticky : cudaSuccess;
		pthread_mutex_unlock(&rt.lock);
		if (!op) return n;
		if (st == cudaSuccess) op->run(op->arg);
		if (op->drop) op->drop(op->arg);
		free(op);
	}
}

/* the stream after s among device d's, the legacy stream first; rt.exec
 * held, so none of them is unlinked meanwhile (cudaStreamDestroy) */
static struct CUstream_st *stream_after(int d, struct CUstream_st *s)
{
	pthread_mutex_lock(&rt.lock);
	struct CUstream_st *n = s == &rt.dev[d].legacy ? rt.dev[d].streams : s->next;
	pthread_mutex_unlock(&rt.lock);
	return n;
}

/* CUEMU_COPIES_EARLY: every stream's head run while it may run early, until
 * none moves (a marker run may satisfy another stream's wait); nothing in
 * the lazy schedule.  rt.exec held. */
static void streams_advance(void)
{
	for (int moved = rt.copies_early; moved;) {
		moved = 0;
		for (int d = 0; d < rt.ndev; d++)
			for (struct CUstream_st *s = &rt.dev[d].legacy; s; s = stream_after(d, s))
				moved |= stream_run(s, NULL, 1) > 0;
	}
}

/* run the queued work of s, all of it or up to until's record, then
 * whatever the early schedule may; takes rt.exec */
static void stream_flush(struct CUstream_st *s, const cuemu_mark_t *until)
{
	pthread_mutex_lock(&rt.exec);
	stream_run(s, until, 0);
	streams_advance();
	pthread_mutex_unlock(&rt.exec);
}

/* every stream of device d; takes rt.exec */
static void device_flush(int d)
{
	pthread_mutex_lock(&rt.exec);
	for (struct CUstream_st *s = &rt.dev[d].legacy; s; s = stream_after(d, s)) stream_run(s, NULL, 0);
	streams_advance();
	pthread_mutex_unlock(&rt.exec);
}

/* queue an op of kind on s, or on its graph while it captures; a copy,
 * marker or wait queued on the stream starts the early schedule */
static cudaError_t enqueue(cudaStream_t s, cuemu_op_kind_t kind, void (*run)(void *),
                           void (*drop)(void *), void *arg)
{
	cudaError_t e = sticky();
	cuemu_op_t *op = e == cudaSuccess ? calloc(1, sizeof *op) : NULL;

	if (!op) {
		if (drop) drop(arg);
		return e == cudaSuccess ? cudaErrorMemoryAllocation : e;
	}
	*op = (cuemu_op_t){ run, drop, arg, kind, NULL };
	struct CUstream_st *st = stream_of(s);
	pthread_mutex_lock(&rt.lock);
	int captured = st->capture != NULL;
	cuemu_op_t **head = captured ? &st->capture->head : &st->head;
	cuemu_op_t **tail = captured ? &st->capture->tail : &st->tail;
	if (*tail) (*tail)->next = op;
	else *head = op;
	*tail = op;
	pthread_mutex_unlock(&rt.lock);
	if (rt.copies_early && kind != CUEMU_OP_LAZY && !captured) {
		pthread_mutex_lock(&rt.exec);
		streams_advance();
		pthread_mutex_unlock(&rt.exec);
	}
	return cudaSuccess;
}

cudaError_t cuemu_enqueue(cudaStream_t s, void (*run)(void *), void (*drop)(void *), void *arg)
{
	return enqueue(s, CUEMU_OP_LAZY, run, drop, arg);
}

int cuemu_stream_device(cudaStream_t s)
{
	if (sticky() == cudaErrorNoDevice) return -1;
	return stream_of(s)->dev;
}

/* the allocation holding p, or NULL; rt.lock held */
static cuemu_alloc_t *alloc_find(const void *p)
{
	for (int i = 0; i < rt.nalloc; i++)
		if ((const char *)p >= rt.alloc[i].p && (const char *)p < rt.alloc[i].p + rt.alloc[i].n)
			return &rt.alloc[i];
	return NULL;
}

int cuemu_check_range(const void *p, size_t n, int dev)
{
	pthread_mutex_lock(&rt.lock);
	cuemu_alloc_t *a = alloc_find(p);
	int ok = a && a->dev == dev && (size_t)((const char *)p - a->p) + n <= a->n;
	pthread_mutex_unlock(&rt.lock);
	return ok ? 0 : -1;
}

int cuemu_in_alloc(const void *p, size_t n)
{
	static __thread const char *lo, *hi;   /* the allocation last found, as of nfree age */
	static __thread long age = -1;
	const char *c = p;

	pthread_mutex_lock(&rt.lock);
	if (age != rt.nfree || c < lo || c + n > hi) {
		cuemu_alloc_t *a = alloc_find(p);
		lo = a ? a->p : NULL;
		hi = a ? a->p + a->n : NULL;
		age = rt.nfree;
	}
	int ok = lo && c >= lo && c + n <= hi;
	pthread_mutex_unlock(&rt.lock);
	return ok ? 0 : -1;
}

/* --- kernels --- */

typedef struct {
	cuemu_grid_t g;
	int          dev;
	long         nth;      /* 1-based launch number */
	long         dnth;     /* 1-based launch number on the device */
} cuemu_kop_t;

static void kernel_run(void *arg)
{
	cuemu_kop_t *k = arg;
	if (rt.fail_dev < 0 ? k->nth == rt.fail_launch : k->dev == rt.fail_dev && k->dnth == rt.fail_launch) {
		pthread_mutex_lock(&rt.lock);
		rt.dev[k->dev].sticky = rt.fail_error;
		pthread_mutex_unlock(&rt.lock);
		fprintf(stderr, "cuemu: kernel %s: injected launch failure (launch %ld)\n", k->g.name, k->nth);
		return;
	}
	cuemu_grid_run(&k->g, rt.reverse);
}

static void kernel_drop(void *arg)
{
	cuemu_kop_t *k = arg;
	k->g.drop(k->g.closure);
	free(k);
}

void cuemu_launch(const cuemu_grid_t *g, cudaStream_t s)
{
	cudaError_t e = sticky();
	int smem_max = CUEMU_SMEM_DEFAULT;
	uint64_t threads = (uint64_t)g->block.x * g->block.y * g->block.z;
	cuemu_kop_t *k;

	pthread_mutex_lock(&rt.lock);
	for (int i = 0; i < rt.nfattr; i++)
		if (rt.fattr[i].func == g->func) smem_max = rt.fattr[i].smem;
	pthread_mutex_unlock(&rt.lock);
	if (e == cudaSuccess &&
	    (threads == 0 || threads > 1024 || g->block.z > 64 || g->grid.x == 0 || g->grid.y == 0 ||
	     g->grid.z == 0 || g->grid.x > 0x7fffffffu || g->grid.y > 65535 || g->grid.z > 65535 ||
	     g->smem > (size_t)smem_max))
		e = cudaErrorInvalidConfiguration;
	if (e == cudaSuccess && !(k = malloc(sizeof *k))) e = cudaErrorMemoryAllocation;
	if (e != cudaSuccess) {
		g->drop(g->closure);
		ret(e);
		return;
	}
	pthread_mutex_lock(&rt.lock);
	int dev = stream_of(s)->dev;
	*k = (cuemu_kop_t){ *g, dev, ++rt.nlaunch, ++rt.dev[dev].nlaunch };
	pthread_mutex_unlock(&rt.lock);
	if (rt.trace) fprintf(stderr, "cuemu: launch %ld: %s on device %d\n", k->nth, g->name, k->dev);
	ret(cuemu_enqueue(s, kernel_run, kernel_drop, k));
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
	cudaError_t e = sticky();
	if (e != cudaSuccess) return ret(e);
	if (!func) return ret(cudaErrorInvalidDeviceFunction);
	if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
	if (value < 0 || value > CUEMU_SMEM_OPTIN) return ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&rt.lock);
	int i = 0;
	while (i < rt.nfattr && rt.fattr[i].func != func) i++;
	if (i == rt.nfattr) {
		cuemu_fattr_t *f = realloc(rt.fattr, sizeof *f * (size_t)(rt.nfattr + 1));
		if (!f) {
			pthread_mutex_unlock(&rt.lock);
			return ret(cudaErrorMemoryAllocation);
		}
		rt.fattr = f;
		rt.nfattr++;
	}
	rt.fattr[i] = (cuemu_fattr_t){ func, value };
	pthread_mutex_unlock(&rt.lock);
	if (rt.trace) fprintf(stderr, "cuemu: cudaFuncSetAttribute %p %d on device %d\n", func, value, cur_dev);
	return cudaSuccess;
}

/* no static shared memory is counted (the kernels' static __shared__
 * arrays live in one section, cuemu.h) */
cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
	cudaError_t e = sticky();
	if (e != cudaSuccess) return ret(e);
	if (!attr || !func) return ret(cudaErrorInvalidValue);
	memset(attr, 0, sizeof *attr);
	attr->maxThreadsPerBlock = 1024;
	attr->maxDynamicSharedSizeBytes = CUEMU_SMEM_DEFAULT;
	pthread_mutex_lock(&rt.lock);
	for (int i = 0; i < rt.nfattr; i++)
		if (rt.fattr[i].func == func) attr->maxDynamicSharedSizeBytes = rt.fattr[i].smem;
	pthread_mutex_unlock(&rt.lock);
	return cudaSuccess;
}

/* --- math --- */

float cuemu_expf(float x)
{
	float e = expf(x);
	pthread_once(&rt.once, rt_init);
	for (int i = 0; i < rt.expf_ulp; i++) e = nextafterf(e, INFINITY);
	return e;
}

/* --- errors --- */

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = sticky();
	if (e != cudaSuccess && e != cudaErrorNoDevice) return e;
	e = last_error;
	last_error = cudaSuccess;
	return e;
}

const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidConfiguration: return "invalid configuration argument";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorInvalidDeviceFunction: return "invalid device function";
	case cudaErrorNoDevice: return "no CUDA-capable device is detected";
	case cudaErrorInvalidResourceHandle: return "invalid resource handle";
	case cudaErrorLaunchFailure: return "unspecified launch failure";
	case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
	case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
	case cudaErrorStreamCaptureIsolation: return "dependency created on uncaptured work in another stream";
	default: return "unrecognized error code";
	}
}

/* --- devices --- */

/* the emulator stands for the runtime it was built against, and its driver */
cudaError_t cudaRuntimeGetVersion(int *v)
{
	if (!v) return ret(cudaErrorInvalidValue);
	*v = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
	if (!v) return ret(cudaErrorInvalidValue);
	*v = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count)
{
	pthread_once(&rt.once, rt_init);
	if (!count) return ret(cudaErrorInvalidValue);
	*count = rt.ndev;
	return rt.ndev ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device)
{
	pthread_once(&rt.once, rt_init);
	if (device < 0 || device >= rt.ndev) return ret(rt.ndev ? cudaErrorInvalidDevice : cudaErrorNoDevice);
	cur_dev = device;
	pthread_mutex_lock(&rt.lock);
	rt.nsetdev++;
	pthread_mutex_unlock(&rt.lock);
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	pthread_once(&rt.once, rt_init);
	if (!prop) return ret(cudaErrorInvalidValue);
	if (device < 0 || device >= rt.ndev) return ret(cudaErrorInvalidDevice);
	memset(prop, 0, sizeof *prop);
	snprintf(prop->name, sizeof prop->name, "cuemu %d (CPU emulation)", device);
	prop->totalGlobalMem = rt.dev[device].mem;
	prop->sharedMemPerBlock = CUEMU_SMEM_DEFAULT;
	prop->sharedMemPerBlockOptin = CUEMU_SMEM_OPTIN;
	prop->warpSize = 32;
	prop->maxThreadsPerBlock = 1024;
	prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
	prop->maxThreadsDim[2] = 64;
	prop->maxGridSize[0] = 0x7fffffff;
	prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
	prop->multiProcessorCount = 1;
	prop->major = rt.dev[device].cc / 10;
	prop->minor = rt.dev[device].cc % 10;
	return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
	cudaError_t e = sticky();
	if (e != cudaSuccess) return ret(e);
	if (!free_b || !total) return ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&rt.lock);
	*total = rt.dev[cur_dev].mem;
	*free_b = rt.dev[cur_dev].mem - rt.dev[cur_dev].used;
	pthread_mutex_unlock(&rt.lock);
	return cudaSuccess;
}

/* --- memory --- */

cudaError_t cudaMalloc(void **p, size_t n)
{
	cudaError_t e = sticky();
	if (e != cudaSuccess) return ret(e);
	if (!p) return ret(cudaErrorInvalidValue);
	*p = NULL;
	if (!n) return cudaSuccess;
	size_t nr = (n + 511) & ~(size_t)511;   /* granularity of the accounting */
	cuemu_dev_t *d = &rt.dev[cur_dev];
	pthread_mutex_lock(&rt.lock);
	long nth = ++rt.nmalloc;
	int refuse = nr < n || nr > d->mem - d->used || nth == rt.fail_malloc;
	if (!refuse && rt.nalloc == rt.alloc_cap) {
		int cap = rt.alloc_cap ? 2 * rt.alloc_cap : 64;
		cuemu_alloc_t *a = realloc(rt.alloc, sizeof *a * (size_t)cap);
		if (a) {
			rt.alloc = a;
			rt.alloc_cap = cap;
		}
		refuse = !a;
	}
	char *m = refuse ? NULL : aligned_alloc(256, nr);
	if (m) {
		rt.alloc[rt.nalloc++] = (cuemu_alloc_t){ m, n, cur_dev };
		d->used += nr;
	}
	pthread_mutex_unlock(&rt.lock);
	if (rt.trace)
		fprintf(stderr, "cuemu: cudaMalloc %ld: %zu bytes on device %d%s\n", nth, n, cur_dev,
		        m ? "" : ": refused");
	if (!m) {
		if (nth == rt.fail_malloc)
			fprintf(stderr, "cuemu: injected cudaMalloc failure (allocation %ld)\n", nth);
		return ret(cudaErrorMemoryAllocation);
	}
	memset(m, 0xff, n);   /* NaN in every float */
	*p = m;
	return cudaSuccess;
}

/* waits for every stream of the pointer's device, as cudaFree does; a
 * pointer of another device than the current one is refused (stricter
 * than CUDA with unified addressing: the backend frees on the device that
 * allocated) */
cudaError_t cudaFree(void *p)
{
	cudaError_t e = sticky();
	if (e != cudaSuccess) return ret(e);
	if (!p) return cudaSuccess;
	pthread_mutex_lock(&rt.lock);
	cuemu_alloc_t *a = alloc_find(p);
	int dev = a && a->p == p ? a->dev : -1;
	pthread_mutex_unlock(&rt.lock);
	if (dev < 0) return ret(cudaErrorInvalidValue);
	if (dev != cur_dev) {
		fprintf(stderr, "cuemu: cudaFree on device %d of a pointer allocated on device %d\n",
		        cur_dev, dev);
		return ret(cudaErrorInvalidValue);
	}
	device_flush(dev);
	pthread_mutex_lock(&rt.lock);
	a = alloc_find(p);
	size_t n = a->n;
	rt.dev[dev].used -= (n + 511) & ~(size_t)511;
	*a = rt.alloc[--rt.nalloc];
	rt.nfree++;
	pthread_mutex_unlock(&rt.lock);
	if (rt.trace) fprintf(stderr, "cuemu: cudaFree: %zu bytes on device %d\n", n, dev);
	free(p);
	return cudaSuccess;
}

typedef struct {
	void       *dst;
	const void *src;
	size_t      n;
} cuemu_copy_t;

static void copy_run(void *arg)
{
	cuemu_copy_t *c = arg;
	memcpy(c->dst, c->src, c->n);
}

/* the device side of a copy must lie in an allocation of the stream's device */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
	cudaError_t e = sticky();
	if (e != cudaSuccess) return ret(e);
	if (!n) return cudaSuccess;
	int dev = stream_of(s)->dev;
	int ok = kind == cudaMemcpyHostToDevice ? !cuemu_check_range(dst, n, dev) :
	         kind == cudaMemcpyDeviceToHost ? !cuemu_check_range(src, n, dev) :
	         kind == cudaMemcpyDeviceToDevice ?
	             !cuemu_check_range(dst, n, dev) && !cuemu_check_range(src, n, dev) : 0;
	if (!ok) {
		fprintf(stderr, "cuemu: cudaMemcpyAsync of %zu bytes: not memory of device %d\n", n, dev);
		return ret(cudaErrorInvalidValue);
	}
	cuemu_copy_t *c = malloc(sizeof *c);
	if (!c) return ret(cudaErrorMemoryAllocation);
	*c = (cuemu_copy_t){ dst, src, n };
	return ret(enqueue(s, CUEMU_OP_EARLY, copy_run, free, c));
}

/* --- streams --- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
	cudaError_t e = sticky();
	if (e != cudaSuccess) return ret(e);
	if (!s) return ret(cudaErrorInvalidValue);
	struct CUstream_st *st = calloc(1, sizeof *st);
	if (!st) return ret(cudaErrorMemoryAllocation);
	st->dev = cur_dev;
	pthread_mutex_lock(&rt.lock);
	st->next = rt.dev[cur_dev].streams;
	rt.dev[cur_dev].streams = st;
	pthread_mutex_unlock(&rt.lock);
	*s = st;
	return cudaSuccess;
}

/* its queued work still runs (here, now); unlinked under rt.exec, so
 * that no run walking the device's streams meets it freed */
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	pthread_once(&rt.once, rt_init);
	if (!s) return ret(cudaErrorInvalidResourceHandle);
	pthread_mutex_lock(&rt.exec);
	stream_run(s, NULL, 0);
	pthread_mutex_lock(&rt.lock);
	struct CUstream_st **pp = &rt.dev[s->dev].streams;
	while (*pp && *pp != s) pp = &(*pp)->next;
	if (*pp) *pp = s->next;
	pthread_mutex_unlock(&rt.lock);
	streams_advance();
	pthread_mutex_unlock(&rt.exec);
	free(s);
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	cudaError_t e = sticky();
	if (e != cudaSuccess) return ret(e);
	if (capture_refuse(stream_of(s))) return ret(cudaErrorStreamCaptureUnsupported);
	pthread_mutex_lock(&rt.lock);
	rt.nsync++;
	pthread_mutex_unlock(&rt.lock);
	stream_flush(stream_of(s), NULL);
	return ret(rt.dev[stream_of(s)->dev].sticky);
}

/* a counter of rt, read under its lock */
static long counter(const long *c)
{
	pthread_mutex_lock(&rt.lock);
	long n = *c;
	pthread_mutex_unlock(&rt.lock);
	return n;
}

long cuemu_stream_syncs(void) { return counter(&rt.nsync); }

long cuemu_set_devices(void) { return counter(&rt.nsetdev); }

/* --- pinned host memory: plain host memory here --- */

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags)
{
	(void)flags;
	if (!p) return ret(cudaErrorInvalidValue);
	*p = malloc(n ? n : 1);
	return *p ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void *p)
{
	free(p);
	return cudaSuccess;
}

/* --- events: a record is a marker in a stream's queue, reached once the
 * stream ran up to it (CUevent_st).  Synchronising on an event runs its
 * stream up to the marker of its last record, no further; a stream waiting
 * for an event queues a wait bound to the last record as of the call,
 * which when run runs the record's stream up to that marker.  So in the
 * lazy schedule work on the waiting stream runs after the record's work,
 * and work after the record only once its own stream syncs; the early
 * schedule also runs copies held back by nothing but reached waits. --- */

long cuemu_events_live(void) { return counter(&rt.nevent); }

static void event_unref(struct CUevent_st *ev)
{
	pthread_mutex_lock(&rt.lock);
	int last = --ev->refs == 0;
	rt.nevent -= last;
	pthread_mutex_unlock(&rt.lock);
	if (last) free(ev);
}

/* a marker: the event has reached its record */
static void mark_run(void *arg)
{
	cuemu_mark_t *m = arg;
	pthread_mutex_lock(&rt.lock);
	if (m->ev->done_gen < m->gen) m->ev->done_gen = m->gen;
	pthread_mutex_unlock(&rt.lock);
}

/* a marker dropped unrun (a sticky error) counts as reached too, so that
 * no wait looks for it in a stream perhaps destroyed since */
static void mark_drop(void *arg)
{
	cuemu_mark_t *m = arg;
	mark_run(m);
	event_unref(m->ev);
	free(m);
}

/* a wait: the record's stream run up to its marker; stream_run looks at
 * the stream only while the marker has not run, and until then it lives
 * (cudaStreamDestroy runs its queue first) */
static void wait_run(void *arg)
{
	cuemu_mark_t *m = arg;
	stream_run(m->stream, m, 0);
}

static void wait_drop(void *arg)
{
	cuemu_mark_t *m = arg;
	event_unref(m->ev);
	free(m);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags)
{
	(void)flags;
	pthread_once(&rt.once, rt_init);
	if (!ev) return ret(cudaErrorInvalidValue);
	*ev = calloc(1, sizeof **ev);   /* never recorded: reached record 0 */
	if (!*ev) return ret(cudaErrorMemoryAllocation);
	(*ev)->refs = 1;
	pthread_mutex_lock(&rt.lock);
	rt.nevent++;
	pthread_mutex_unlock(&rt.lock);
	return cudaSuccess;
}

/* returns at once, as on a card; ev is freed once no queued marker or
 * wait holds it */
cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
	if (!ev) return ret(cudaErrorInvalidResourceHandle);
	event_unref(ev);
	return cudaSuccess;
}

/* on a capturing stream the marker is a graph node bound to no record
 * (gen 0): it leaves ev as it was, since no wait can be captured to use it */
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
	cudaError_t e = sticky();
	if (e != cudaSuccess) return ret(e);
	if (!ev) return ret(cudaErrorInvalidResourceHandle);
	cuemu_mark_t *m = malloc(sizeof *m);
	if (!m) return ret(cudaErrorMemoryAllocation);
	struct CUstream_st *st = stream_of(s);
	pthread_mutex_lock(&rt.lock);
	if (!st->capture) {
		ev->stream = st;
		ev->gen++;
	}
	*m = (cuemu_mark_t){ ev, st->capture ? 0 : ev->gen, st };
	ev->refs++;
	pthread_mutex_unlock(&rt.lock);
	return ret(enqueue(s, CUEMU_OP_EARLY, mark_run, mark_drop, m));
}

/* s waits for ev's last record as of this call; nothing is queued when ev
 * was never recorded or has reached it.  Refused on a capturing stream, as
 * a card refuses an event from outside the capture (a record inside one
 * binds no wait here, cudaEventRecord). */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
	cudaError_t e = sticky();
	if (e != cudaSuccess) return ret(e);
	if (!ev) return ret(cudaErrorInvalidResourceHandle);
	if (flags & ~(unsigned)cudaEventWaitExternal) return ret(cudaErrorInvalidValue);
	if (capture_refuse(stream_of(s))) return ret(cudaErrorStreamCaptureIsolation);
	cuemu_mark_t *m = malloc(sizeof *m);
	if (!m) return ret(cudaErrorMemoryAllocation);
	pthread_mutex_lock(&rt.lock);
	*m = (cuemu_mark_t){ ev, ev->gen, ev->stream };
	int pending = !mark_reached(m);
	ev->refs += pending;
	pthread_mutex_unlock(&rt.lock);
	if (!pending) {
		free(m);
		return cudaSuccess;
	}
	return ret(enqueue(s, CUEMU_OP_WAIT, wait_run, wait_drop, m));
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
	cudaError_t e = sticky();
	if (e != cudaSuccess) return ret(e);
	if (!ev) return ret(cudaErrorInvalidResourceHandle);
	pthread_mutex_lock(&rt.lock);
	cuemu_mark_t last = { ev, ev->gen, ev->stream };
	int pending = !mark_reached(&last);
	pthread_mutex_unlock(&rt.lock);
	if (!pending) return cudaSuccess;
	if (capture_refuse(last.stream)) return ret(cudaErrorStreamCaptureUnsupported);
	stream_flush(last.stream, &last);
	return ret(rt.dev[last.stream->dev].sticky);
}

/* --- graphs: a capturing stream's work goes to its graph (cuemu_enqueue);
 * a launch queues one operation that runs the graph's nodes in order --- */

/* one reference of g less; the nodes dropped with the last */
static void graph_unref(struct CUgraph_st *g)
{
	pthread_mutex_lock(&rt.lock);
	int last = --g->refs == 0;
	pthread_mutex_unlock(&rt.lock);
	if (!last) return;
	for (cuemu_op_t *op = g->head, *next; op; op = next) {
		next = op->next;
		if (op->drop) op->drop(op->arg);
		free(op);
	}
	free(g);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
	cudaError_t e = sticky();
	(void)mode;
	if (e != cudaSuccess) return ret(e);
	if (!s) return ret(cudaErrorStreamCaptureUnsupported);   /* the legacy stream */
	struct CUgraph_st *g = calloc(1, sizeof *g);
	if (!g) return ret(cudaErrorMemoryAllocation);
	g->refs = 1;
	g->dev = s->dev;
	pthread_mutex_lock(&rt.lock);
	int busy = s->capture != NULL;
	if (!busy) s->capture = g;
	pthread_mutex_unlock(&rt.lock);
	if (busy) free(g);
	return busy ? ret(cudaErrorIllegalState) : cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
	if (!graph) return ret(cudaErrorInvalidValue);
	*graph = NULL;
	if (!s) return ret(cudaErrorIllegalState);
	pthread_mutex_lock(&rt.lock);
	struct CUgraph_st *g = s->capture;
	s->capture = NULL;
	pthread_mutex_unlock(&rt.lock);
	if (!g) return ret(cudaErrorIllegalState);
	if (g->invalid) {
		graph_unref(g);
		return ret(cudaErrorStreamCaptureInvalidated);
	}
	*graph = g;
	return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
	if (!st) return ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&rt.lock);
	struct CUgraph_st *g = s ? s->capture : NULL;
	*st = !g ? cudaStreamCaptureStatusNone :
	      g->invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
	pthread_mutex_unlock(&rt.lock);
	return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g, unsigned long long flags)
{
	(void)flags;
	if (!exec || !g) return ret(cudaErrorInvalidValue);
	if (!(*exec = malloc(sizeof **exec))) return ret(cudaErrorMemoryAllocation);
	pthread_mutex_lock(&rt.lock);
	g->refs++;
	pthread_mutex_unlock(&rt.lock);
	(*exec)->g = g;
	return cudaSuccess;
}

/* one launch: the nodes in order; a sticky error drops the rest */
static void graph_run(void *arg)
{
	struct CUgraph_st *g = arg;
	for (cuemu_op_t *op = g->head; op; op = op->next) {
		pthread_mutex_lock(&rt.lock);
		cudaError_t st = rt.dev[g->dev].sticky;
		pthread_mutex_unlock(&rt.lock);
		if (st != cudaSuccess) break;
		op->run(op->arg);
	}
}

static void graph_drop(void *arg) { graph_unref(arg); }

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
	cudaError_t e = sticky();
	if (e != cudaSuccess) return ret(e);
	if (!exec) return ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&rt.lock);
	exec->g->refs++;
	long nth = ++rt.ngraph;
	pthread_mutex_unlock(&rt.lock);
	if (rt.trace) fprintf(stderr, "cuemu: graph launch %ld on device %d\n", nth, stream_of(s)->dev);
	return ret(cuemu_enqueue(s, graph_run, graph_drop, exec->g));
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
	if (!exec) return ret(cudaErrorInvalidValue);
	graph_unref(exec->g);
	free(exec);
	return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	if (!g) return ret(cudaErrorInvalidValue);
	graph_unref(g);
	return cudaSuccess;
}

long cuemu_graph_launches(void) { return counter(&rt.ngraph); }

long cuemu_kernel_launches(void) { return counter(&rt.nlaunch); }
