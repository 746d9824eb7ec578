/* gemm_bf16.c - the CPU backend's GEMMs shape by shape: fp32 (the own
 * kernels) against bf16 on oneDNN's matmul (ESMBATCH_CPU_DNNL=1 set here,
 * so every shape goes there where the ISA has a bf16 matmul) and against
 * bf16 widened to fp32, as nn.Linear products X W^T with W a bf16 weight.
 * The fastest of R runs of each; prints a markdown table of microseconds,
 * GFLOP/s and the speed-ups over fp32.  Which shapes oneDNN takes by
 * default (cpu_dnnl_wins) comes from this table.
 *
 *   bench/gemm_bf16 [THREADS [R]]     (make bench/gemm_bf16)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/cpu_dnnl.h"
#include "io/safetensors.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* fastest of r runs of g on be, seconds */
static double best_of(be_t *be, const be_gemm_t *g, int r)
{
	double best = 1e30;
	for (int i = 0; i < r; i++) {
		double t = now();
		if (be->gemm(be, g) < 0) return -1.0;
		t = now() - t;
		if (t < best) best = t;
	}
	return best;
}

int main(int argc, char **argv)
{
	/* [m, k] x [k, n]: the language model's and the trunk's linears */
	static const int shapes[][3] = {
		{ 128, 320, 320 }, { 128, 320, 1280 }, { 128, 1280, 320 }, { 256, 320, 1280 },
		{ 256, 1024, 1024 }, { 256, 2560, 2560 }, { 4096, 128, 128 }, { 16384, 128, 128 },
		{ 16384, 128, 512 }, { 4096, 512, 128 },
	};
	int threads = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 10;
	be_t *f32 = be_cpu_init(threads), *b16 = be_cpu_init(threads);
	const char *isa;
	int native;

	setenv("ESMBATCH_CPU_DNNL", "1", 1);
	native = cpu_dnnl_probe(&isa);
	if (!f32 || !b16 || be_cpu_set_precision(b16, BE_PREC_BF16) < 0) {
		fprintf(stderr, "gemm_bf16: no CPU backend at bf16 (a build without oneDNN?)\n");
		return 1;
	}
	printf("oneDNN %s, ISA %s (%s); %d threads, fastest of %d\n\n", cpu_dnnl_version(), isa,
	       native == 1 ? "bf16 matmul" : "no bf16 matmul: both bf16 columns widened", threads, reps);
	printf("| [m, k] x [k, n] | fp32 us | GFLOP/s | bf16 oneDNN us | GFLOP/s | x fp32 | bf16 widened us | x fp32 |\n");
	printf("|---|---|---|---|---|---|---|---|\n");
	for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
		int m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
		float *x = malloc(sizeof *x * (size_t)m * k), *w = malloc(sizeof *w * (size_t)n * k);
		float *c = malloc(sizeof *c * (size_t)m * n);
		uint16_t *w16 = malloc(sizeof *w16 * (size_t)n * k);
		double flop = 2.0 * m * n * k, tf, tb, tw;
		if (!x || !w || !c || !w16) return 1;
		for (int64_t i = 0; i < (int64_t)m * k; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
		for (int64_t i = 0; i < (int64_t)n * k; i++) {
			w[i] = (float)rand() / RAND_MAX - 0.5f;
			w16[i] = safetensors_f32_to_bf16(w[i]);
		}
		be_gemm_t g = { .transb = 1, .m = m, .n = n, .k = k, .alpha = 1.0f, .a = x, .lda = k,
		                .b = w, .ldb = k, .c = c, .ldc = n, .batch = 1 };
		tf = best_of(f32, &g, reps);
		g.b = (const float *)w16;
		g.b_bf16 = 1;
		tb = best_of(b16, &g, reps);
		tw = 1e30;   /* the widened path: cpu_dnnl_widened on the bf16 weight */
		for (int r = 0; r < reps; r++) {
			double t = now();
			if (cpu_dnnl_widened(b16, &g) < 0) return 1;
			t = now() - t;
			if (t < tw) tw = t;
		}
		printf("| [%d, %d] x [%d, %d] | %.0f | %.0f | %.0f | %.0f | %.2f | %.0f | %.2f |\n", m, k, k, n,
		       tf * 1e6, flop / tf * 1e-9, tb * 1e6, flop / tb * 1e-9, tf / tb, tw * 1e6, tf / tw);
		free(x); free(w); free(c); free(w16);
	}
	be_free(b16);
	be_free(f32);
	return 0;
}
