/* cuemu_fiber.c - runs a kernel launch on the CPU: the blocks one after
 * another, every thread of a block its own fiber (own stack and registers),
 * scheduled run-until-blocked.  __syncthreads is a real block barrier (all
 * live threads at the same call), __syncwarp and the shuffles exchange
 * among the lanes of the mask at the call, a warp collective (wmma) runs
 * once all 32 lanes meet at it; a divergent barrier, shuffle or collective
 * ends the process with a message naming the kernel.  Static and dynamic
 * shared memory are NaN-filled before every block.  Fibers switch with a
 * small assembly routine on x86-64, with ucontext elsewhere.
 *
 * Under ThreadSanitizer (tests/test_cuda_ops_tsan: the TSan runtime linked,
 * this file itself not instrumented) every fiber is also a TSan fiber whose
 * switches do not synchronise; the only happens-before edges are those of
 * CUDA: the host before a block's threads, a block's threads before the
 * host (and so before the next block), __syncthreads (release on arrival,
 * acquire on departure, one sync object per barrier generation) and
 * __syncwarp (the same among the lanes of the warp); shuffles order no
 * memory.  A missing barrier is then a data race that TSan reports with
 * the two racing lines. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include "cuemu_rt.h"

#define CUEMU_STACK (64u << 10)   /* bytes of stack per fiber, a guard page below */
#define CUEMU_STACK_TSAN (1u << 20)   /* under TSan, whose reports run on the fiber's stack */

/* ThreadSanitizer's fiber and annotation interface
 * (<sanitizer/tsan_interface.h>), weak: defined only where the TSan runtime
 * is linked in */
void *__tsan_get_current_fiber(void) __attribute__((weak));
void *__tsan_create_fiber(unsigned flags) __attribute__((weak));
void  __tsan_switch_to_fiber(void *fiber, unsigned flags) __attribute__((weak));
void  __tsan_set_fiber_name(void *fiber, const char *name) __attribute__((weak));
void  __tsan_acquire(void *addr) __attribute__((weak));
void  __tsan_release(void *addr) __attribute__((weak));
#define TSAN_NO_SYNC 1u   /* __tsan_switch_to_fiber_no_sync */

enum { F_READY, F_BAR, F_WARP, F_DONE };

typedef struct {
	cuemu_ids_t ids;
	int         state;
	const void *site;     /* where it waits: the caller of the barrier / warp op */
	unsigned    mask;     /* warp op: lanes taking part */
	int         kind, arg, width;
	uint64_t    val;      /* warp op: value sent, then received */
	void      (*coll)(void *const args[32]);   /* CUEMU_COLLECTIVE: its fn */
	char       *stack;    /* [stack_size] */
	void       *tsan;     /* its TSan fiber (under TSan) */
	cuemu_async_t async;  /* its cp.async copies in flight (c kept across blocks) */
#if defined(__x86_64__)
	void       *sp;
#else
	ucontext_t  uc;
#endif
} cuemu_fiber_t;

/* the scheduler of one host thread */
typedef struct {
	cuemu_fiber_t      *f;        /* [cap] */
	int                 cap, n;
	cuemu_fiber_t      *cur;
	const cuemu_grid_t *g;
	void               *smem;     /* [smem_cap] dynamic shared memory, on 128 bytes, not 256 */
	void               *smem_raw; /* its allocation */
	size_t              smem_cap;
#if defined(__x86_64__)
	void               *sp;
#else
	ucontext_t          uc;
#endif
	/* under TSan: the host thread's fiber; the addresses whose sync objects
	 * stand for the start and the end of a block, __syncthreads of
	 * generation bar_gen (by its parity: a generation's objects are not
	 * released again before every thread acquired them) and __syncwarp of
	 * each warp likewise */
	void               *tsan_host;
	char                start_sync, end_sync, bar_sync[2], warp_sync[32][2];
	unsigned            bar_gen, warp_gen[32];
} cuemu_sched_t;

__thread cuemu_ids_t *cuemu_ids;
static __thread cuemu_sched_t sched;
static int    tsan;                         /* the TSan runtime is linked in */
static size_t stack_size = CUEMU_STACK;

__attribute__((constructor)) static void tsan_detect(void)
{
	if (__tsan_switch_to_fiber && __tsan_create_fiber && __tsan_get_current_fiber &&
	    __tsan_set_fiber_name && __tsan_acquire && __tsan_release) {
		tsan = 1;
		stack_size = CUEMU_STACK_TSAN;
	}
}

/* the static __shared__ arrays of every kernel (cuemu.h) */
extern char __start_cuemu_shared[] __attribute__((weak));
extern char __stop_cuemu_shared[] __attribute__((weak));

static void fiber_main(void);

/* the top of f's stack, 16-aligned; staggered by fiber so that the hot top
 * frames of a block's fibers do not all fall in the same cache sets */
static char *fiber_top(cuemu_fiber_t *f)
{
	return f->stack + stack_size - (size_t)(f - sched.f) % 64 * 320;
}

#if defined(__x86_64__)
/* cuemu_ctx_swap(save, to): saves the callee-saved registers on this stack,
 * *save = its pointer, continues on to (the floating-point control state
 * is the host thread's: nothing here changes it) */
void cuemu_ctx_swap(void **save, void *to);
__asm__(
	".text\n"
	".globl cuemu_ctx_swap\n"
	".hidden cuemu_ctx_swap\n"
	".type cuemu_ctx_swap, @function\n"
	"cuemu_ctx_swap:\n"
	"	pushq %rbp\n	pushq %rbx\n	pushq %r12\n	pushq %r13\n	pushq %r14\n	pushq %r15\n"
	"	movq %rsp, (%rdi)\n"
	"	movq %rsi, %rsp\n"
	"	popq %r15\n	popq %r14\n	popq %r13\n	popq %r12\n	popq %rbx\n	popq %rbp\n"
	"	ret\n"
	".size cuemu_ctx_swap, .-cuemu_ctx_swap\n"
	/* a new fiber's first return lands here, %r12 = its entry */
	"cuemu_ctx_start:\n"
	"	callq *%r12\n"
	"	ud2\n");
extern char cuemu_ctx_start[] __asm__("cuemu_ctx_start");

/* f's stack set up so that switching to it calls fiber_main */
static void fiber_prepare(cuemu_fiber_t *f)
{
	uint64_t *sp = (uint64_t *)fiber_top(f) - 9;   /* 16-aligned after the ret */

	sp[0] = sp[1] = sp[2] = 0;              /* r15, r14, r13 */
	sp[3] = (uint64_t)(uintptr_t)fiber_main; /* r12 */
	sp[4] = sp[5] = 0;                      /* rbx, rbp */
	sp[6] = (uint64_t)(uintptr_t)cuemu_ctx_start;
	f->sp = sp;
}

static void to_fiber(cuemu_fiber_t *f)
{
	if (tsan) __tsan_switch_to_fiber(f->tsan, TSAN_NO_SYNC);
	cuemu_ctx_swap(&sched.sp, f->sp);
}

static void to_sched(cuemu_fiber_t *f)
{
	if (tsan) __tsan_switch_to_fiber(sched.tsan_host, TSAN_NO_SYNC);
	cuemu_ctx_swap(&f->sp, sched.sp);
}
#else
static void fiber_prepare(cuemu_fiber_t *f)
{
	getcontext(&f->uc);
	f->uc.uc_stack.ss_sp = f->stack;
	f->uc.uc_stack.ss_size = (size_t)(fiber_top(f) - f->stack);
	f->uc.uc_link = NULL;
	makecontext(&f->uc, fiber_main, 0);
}

static void to_fiber(cuemu_fiber_t *f)
{
	if (tsan) __tsan_switch_to_fiber(f->tsan, TSAN_NO_SYNC);
	swapcontext(&sched.uc, &f->uc);
}

static void to_sched(cuemu_fiber_t *f)
{
	if (tsan) __tsan_switch_to_fiber(sched.tsan_host, TSAN_NO_SYNC);
	swapcontext(&f->uc, &sched.uc);
}
#endif

void cuemu_fail(const char *what)
{
	fprintf(stderr, "cuemu: kernel %s, block (%u, %u, %u): %s\n", sched.g->name,
	        sched.f[0].ids.block_idx.x, sched.f[0].ids.block_idx.y, sched.f[0].ids.block_idx.z,
	        what);
	abort();
}

static void fiber_main(void)
{
	if (tsan) __tsan_acquire(&sched.start_sync);   /* after the host's writes */
	sched.g->body(sched.g->closure);
	if (sched.cur->async.n) cuemu_fail("thread ended with cp.async copies not waited for");
	if (tsan) __tsan_release(&sched.end_sync);     /* before the host's reads */
	sched.cur->state = F_DONE;
	to_sched(sched.cur);
}

/* n fibers with stacks; 0 or -1 */
static int fibers_reserve(int n)
{
	if (n <= sched.cap) return 0;
	cuemu_fiber_t *f = realloc(sched.f, sizeof *f * (size_t)n);
	if (!f) return -1;
	sched.f = f;
	long page = sysconf(_SC_PAGESIZE);
	for (; sched.cap < n; sched.cap++) {
		char *m = mmap(NULL, stack_size + page, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED || mprotect(m, page, PROT_NONE)) return -1;
		f[sched.cap].stack = m + page;
		f[sched.cap].async = (cuemu_async_t){ NULL, 0, 0, 0 };
		if (tsan) {
			/* the slot's TSan fiber runs thread slot of every block */
			char name[48];
			snprintf(name, sizeof name, "CUDA thread %d (warp %d lane %d)", sched.cap,
			         sched.cap / 32, sched.cap % 32);
			if (!(f[sched.cap].tsan = __tsan_create_fiber(0))) return -1;
			__tsan_set_fiber_name(f[sched.cap].tsan, name);
		}
	}
	return 0;
}

void *cuemu_dyn_shared(void)
{
	return sched.smem;
}

cuemu_async_t *cuemu_thread_async(void)
{
	return &sched.cur->async;
}

int cuemu_in_shared(const void *p, size_t n)
{
	const char *c = p, *d = sched.smem;
	return (d && c >= d && c + n <= d + sched.g->smem) ||
	       (__start_cuemu_shared && c >= __start_cuemu_shared && c + n <= __stop_cuemu_shared);
}

/* complete the warp op of the warp of lanes [w0, w0 + 32) once all its
 * lanes have blocked; 1 when one was released */
static int warp_release(int w0)
{
	cuemu_fiber_t *l = &sched.f[w0], *first = NULL;
	int nl = sched.n - w0 < 32 ? sched.n - w0 : 32;
	uint64_t in[32];

	for (int i = 0; i < nl && !first; i++)
		if (l[i].state == F_WARP) first = &l[i];
	if (!first) return 0;
	for (int i = 0; i < nl; i++) {
		if (!(first->mask >> i & 1u)) continue;
		if (l[i].state == F_DONE) cuemu_fail("warp operation names an exited lane");
		if (l[i].state != F_WARP || l[i].site != first->site || l[i].mask != first->mask ||
		    l[i].kind != first->kind)
			cuemu_fail("divergent warp operation (lanes of the mask at different calls)");
	}
	if (nl < 32 && first->mask >> nl) cuemu_fail("warp operation names a lane beyond the block");
	if (first->kind == CUEMU_COLLECTIVE) {
		void *args[32];
		for (int i = 0; i < 32; i++) {
			if (l[i].coll != first->coll) cuemu_fail("divergent wmma operation");
			args[i] = (void *)(uintptr_t)l[i].val;
		}
		first->coll(args);
		for (int i = 0; i < 32; i++) l[i].state = F_READY;
		return 1;
	}
	if (first->kind == CUEMU_SYNCWARP) sched.warp_gen[w0 / 32]++;
	for (int i = 0; i < nl; i++) in[i] = l[i].val;
	for (int i = 0; i < nl; i++) {
		cuemu_fiber_t *f = &l[i];
		if (f->state != F_WARP) continue;
		if (!(f->mask >> i & 1u)) cuemu_fail("warp operation by a lane outside its mask");
		int w = f->width, base = i & ~(w - 1), src = i;
		switch (f->kind) {
		case CUEMU_SHFL_IDX:  src = base + (f->arg & (w - 1)); break;
		case CUEMU_SHFL_UP:   src = i - f->arg >= base ? i - f->arg : i; break;
		case CUEMU_SHFL_DOWN: src = i + f->arg < base + w ? i + f->arg : i; break;
		case CUEMU_SHFL_XOR:  src = (i ^ f->arg) < base + w ? i ^ f->arg : i; break;
		}
		if (f->kind != CUEMU_SYNCWARP && (src >= nl || !(f->mask >> src & 1u)))
			cuemu_fail("shuffle reads a lane outside the mask");
		f->val = in[src];
		f->state = F_READY;
	}
	return 1;
}

/* release __syncthreads when every live thread waits at the same one;
 * 0 when the block is done */
static int barrier_release(void)
{
	const void *site = NULL;
	int live = 0;

	for (int i = 0; i < sched.n; i++) {
		cuemu_fiber_t *f = &sched.f[i];
		if (f->state == F_DONE) continue;
		if (f->state != F_BAR || (site && f->site != site))
			cuemu_fail("divergent __syncthreads (live threads at different calls)");
		site = f->site;
		live++;
	}
	for (int i = 0; i < sched.n; i++)
		if (sched.f[i].state == F_BAR) sched.f[i].state = F_READY;
	sched.bar_gen += live > 0;
	return live;
}

static void block_run(uint3 bid, int reverse)
{
	const cuemu_grid_t *g = sched.g;
	size_t shared = (size_t)(__stop_cuemu_shared - __start_cuemu_shared);

	if (shared) memset(__start_cuemu_shared, 0xff, shared);   /* NaN */
	if (g->smem) memset(sched.smem, 0xff, g->smem);
	int i = 0;
	for (unsigned z = 0; z < g->block.z; z++)
		for (unsigned y = 0; y < g->block.y; y++)
			for (unsigned x = 0; x < g->block.x; x++, i++) {
				cuemu_fiber_t *f = &sched.f[i];
				f->ids = (cuemu_ids_t){ { x, y, z }, bid, { g->block.x, g->block.y, g->block.z },
				                        { g->grid.x, g->grid.y, g->grid.z } };
				f->state = F_READY;
				f->async.n = f->async.committed = 0;
				fiber_prepare(f);
			}
	if (tsan) __tsan_release(&sched.start_sync);
	/* each warp in turn runs its ready lanes until they block, its warp ops
	 * released as they complete; then the block barrier is released */
	int nw = (sched.n + 31) / 32;
	for (;;) {
		for (int wi = 0; wi < nw; wi++) {
			int w0 = 32 * (reverse ? nw - 1 - wi : wi);
			int nl = sched.n - w0 < 32 ? sched.n - w0 : 32;
			do {
				for (int li = 0; li < nl; li++) {
					cuemu_fiber_t *f = &sched.f[w0 + (reverse ? nl - 1 - li : li)];
					if (f->state != F_READY) continue;
					sched.cur = f;
					cuemu_ids = &f->ids;
					to_fiber(f);
				}
			} while (warp_release(w0));
		}
		cuemu_ids = NULL;
		if (!barrier_release()) break;
	}
	if (tsan) __tsan_acquire(&sched.end_sync);
}

/* sched.smem of at least n bytes, on 128 bytes as extern __shared__
 * __align__(128) (CU_DYN_SHARED) promises and, so that a kernel counting
 * on more shows, never on 256; 0 or -ENOMEM */
static int smem_reserve(size_t n)
{
	void *raw = aligned_alloc(256, (n + 128 + 255) / 256 * 256);

	if (!raw) return -ENOMEM;
	free(sched.smem_raw);
	sched.smem_raw = raw;
	sched.smem = (char *)raw + 128;
	sched.smem_cap = n;
	return 0;
}

void cuemu_grid_run(const cuemu_grid_t *g, int reverse)
{
	int64_t nb = (int64_t)g->grid.x * g->grid.y * g->grid.z;

	if (tsan) sched.tsan_host = __tsan_get_current_fiber();
	sched.g = g;
	sched.n = (int)(g->block.x * g->block.y * g->block.z);
	if (fibers_reserve(sched.n) ||
	    (g->smem > sched.smem_cap && smem_reserve(g->smem))) {
		fprintf(stderr, "cuemu: out of host memory for kernel %s\n", g->name);
		abort();
	}
	for (int64_t b = 0; b < nb; b++) {
		int64_t k = reverse ? nb - 1 - b : b;
		uint3 bid = { (unsigned)(k % g->grid.x), (unsigned)(k / g->grid.x % g->grid.y),
		              (unsigned)(k / g->grid.x / g->grid.y) };
		block_run(bid, reverse);
	}
	sched.g = NULL;
}

void cuemu_syncthreads(void)
{
	cuemu_fiber_t *f = sched.cur;
	char *sync = &sched.bar_sync[sched.bar_gen & 1];
	f->site = __builtin_return_address(0);
	f->state = F_BAR;
	if (tsan) __tsan_release(sync);
	to_sched(f);
	if (tsan) __tsan_acquire(sync);
}

/* the running fiber blocks at warp operation kind, called from site */
static uint64_t warp_op(const void *site, unsigned mask, uint64_t v, int kind, int arg, int width)
{
	cuemu_fiber_t *f = sched.cur;
	if (width < 1 || width > 32 || (width & (width - 1))) cuemu_fail("shuffle width not a power of 2 <= 32");
	f->site = site;
	f->mask = mask;
	f->kind = kind;
	f->arg = arg;
	f->width = width;
	f->val = v;
	f->state = F_WARP;
	/* __syncwarp orders memory among the lanes; a shuffle does not */
	int w = (int)(f - sched.f) / 32;
	char *sync = kind == CUEMU_SYNCWARP ? &sched.warp_sync[w][sched.warp_gen[w] & 1] : NULL;
	if (tsan && sync) __tsan_release(sync);
	to_sched(f);
	if (tsan && sync) __tsan_acquire(sync);
	return f->val;
}

uint64_t cuemu_warp_op(unsigned mask, uint64_t v, int kind, int arg, int width)
{
	sched.cur->coll = NULL;
	return warp_op(__builtin_return_address(0), mask, v, kind, arg, width);
}

void cuemu_warp_collective(void (*fn)(void *const args[32]), void *arg)
{
	cuemu_fiber_t *f = sched.cur;
	f->coll = fn;
	warp_op(__builtin_return_address(0), 0xffffffffu, (uint64_t)(uintptr_t)arg,
	        CUEMU_COLLECTIVE, 0, 32);
}
