/* test_cuemu_wmma.cc - the emulator's bfloat16 / half conversions and
 * nvcuda::wmma (cuemu_mma.h) against plain loops: each warp of a block
 * multiplies its own tiles (bf16 m16n16k16, half m32n8k16, both operand and
 * memory layouts), with a fill and a uniform elementwise update; and the
 * misuses a card punishes end the process (a partial warp, arguments that
 * differ across the warp, a misaligned pointer).  Built like the kernels
 * (g++ -include cuemu.h). */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuemu_check.h"

using namespace nvcuda;

static float fbits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* round to nearest even, from the IEEE 754 formats: bfloat16 keeps 8
 * significant bits, binary16 11 (subnormals from 2^-24) */
static void test_conversions(void)
{
	expect(__float2bfloat16(1.0f + 0x1p-8f).x == 0x3f80, "bf16: 1 + 2^-8 ties to 1 (even)");
	expect(__float2bfloat16(1.0f + 0x3p-8f).x == 0x3f82, "bf16: 1 + 3 2^-8 ties to 1 + 2^-6 (even)");
	expect(__float2bfloat16(1.0f + 0x1.8p-8f).x == 0x3f81, "bf16: 1 + 1.5 2^-8 rounds up to 1 + 2^-7");
	expect(__float2bfloat16(-3.0f).x == 0xc040, "bf16: -3");
	expect(__float2bfloat16(fbits(0x7f7fffffu)).x == 0x7f80, "bf16: FLT_MAX rounds to +inf");
	expect(isnan(__bfloat162float(__float2bfloat16(NAN))), "bf16: NaN stays NaN");
	expect(__bfloat162float(__float2bfloat16_rn(0.1f)) == 0.10009765625f, "bf16: 0.1 -> 0.10009765625");
	expect(__float2half(65504.0f).x == 0x7bff && __float2half(65519.0f).x == 0x7bff,
	       "half: 65504 and 65519 -> 65504 (largest finite)");
	expect(__float2half(65520.0f).x == 0x7c00, "half: 65520 ties to +inf");
	expect(__float2half(1.0f + 0x1p-11f).x == 0x3c00, "half: 1 + 2^-11 ties to 1 (even)");
	expect(__float2half(0x1p-25f).x == 0 && __float2half(0x3p-25f).x == 2,
	       "half: 2^-25 ties to 0, 3 2^-25 to 2^-23 (subnormals, even)");
	expect(__float2half(0x1p-14f).x == 0x0400 && __half2float(__float2half_rn(-0x1p-24f)) == -0x1p-24f,
	       "half: 2^-14 smallest normal, -2^-24 smallest subnormal");
	expect(__half2float(__float2half(0.1f)) == 0.0999755859375f, "half: 0.1 -> 0.0999755859375");
	expect(isnan(__half2float(__float2half(NAN))) && __half2float(__float2half(-INFINITY)) == -INFINITY,
	       "half: NaN, -inf");
}

/* warp w of the block: d[w] = 2 (a[w] b[w] + c[w]) - 1 with a [16, 16]
 * row-major (ld 24), b [16, 16] col-major (ld 16), c col-major, d
 * row-major (ld 20); f[w] = a fill of 0.75 */
static void k_bf16(const __nv_bfloat16 *a, const __nv_bfloat16 *b, const float *c, float *d, float *f)
{
	int w = threadIdx.x / 32;
	wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc, fill;
	wmma::load_matrix_sync(fa, a + w * 16 * 24, 24);
	wmma::load_matrix_sync(fb, b + w * 256, 16);
	wmma::load_matrix_sync(acc, c + w * 256, 16, wmma::mem_col_major);
	wmma::mma_sync(acc, fa, fb, acc);
	for (int i = 0; i < acc.num_elements; i++) acc.x[i] = 2.0f * acc.x[i] - 1.0f;
	wmma::store_matrix_sync(d + w * 16 * 20, acc, 20, wmma::mem_row_major);
	wmma::fill_fragment(fill, 0.75f);
	wmma::store_matrix_sync(f + w * 256, fill, 16, wmma::mem_row_major);
}

/* d = a b with a [32, 16] half col-major (ld 32), b [16, 8] row-major (ld
 * 8), d [32, 8] col-major (ld 32) */
static void k_half(const __half *a, const __half *b, float *d)
{
	wmma::fragment<wmma::matrix_a, 32, 8, 16, __half, wmma::col_major> fa;
	wmma::fragment<wmma::matrix_b, 32, 8, 16, __half, wmma::row_major> fb;
	wmma::fragment<wmma::accumulator, 32, 8, 16, float> acc;
	wmma::fill_fragment(acc, 0.0f);
	wmma::load_matrix_sync(fa, a, 32);
	wmma::load_matrix_sync(fb, b, 8);
	wmma::mma_sync(acc, fa, fb, acc);
	wmma::store_matrix_sync(d, acc, 32, wmma::mem_col_major);
}

/* misuses: 0 only lanes 0-15 call mma_sync, 1 each lane its own pointer,
 * 2 a pointer off 32 bytes, 3 ldm not a multiple of 16 bytes */
static void k_bad(const __nv_bfloat16 *a, int how)
{
	wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
	int lane = threadIdx.x % 32;
	if (how == 1) wmma::load_matrix_sync(fa, a + 16 * lane, 16);
	if (how == 2) wmma::load_matrix_sync(fa, a + 8, 16);
	if (how == 3) wmma::load_matrix_sync(fa, a, 12);
	if (how == 0 && lane < 16) {
		wmma::fill_fragment(acc, 0.0f);
		wmma::mma_sync(acc, fa, fb, acc);
	}
}


static float urand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (float)(*s >> 8 & 0xffff) / 32768.0f - 1.0f;
}

static void test_bf16(void)
{
	enum { W = 2 };
	static __nv_bfloat16 a[W * 16 * 24], b[W * 256];
	static float c[W * 256], d[W * 16 * 20], f[W * 256];
	unsigned s = 7;
	for (auto &x : a) x = __float2bfloat16(urand(&s));
	for (auto &x : b) x = __float2bfloat16(urand(&s));
	for (auto &x : c) x = urand(&s);
	__nv_bfloat16 *da = dev(a, sizeof a / sizeof *a), *db = dev(b, sizeof b / sizeof *b);
	float *dc = dev(c, sizeof c / sizeof *c), *dd = dev(d, sizeof d / sizeof *d), *df = dev(f, W * 256);
	cuemu_launch_of("k_bf16", k_bf16, dim3(1), dim3(32 * W), 0, 0)(da, db, dc, dd, df);
	get(d, dd, sizeof d / sizeof *d);
	get(f, df, W * 256);
	/* the plain loop in double; the emulator's fp32 sum of K + 1 terms, times 2 */
	double worst = 0.0;
	int fills = 1;
	for (int w = 0; w < W; w++)
		for (int i = 0; i < 16; i++)
			for (int j = 0; j < 16; j++) {
				double ref = c[w * 256 + j * 16 + i], mag = fabs(ref);
				for (int k = 0; k < 16; k++) {
					double p = (double)__bfloat162float(a[w * 384 + i * 24 + k]) *
					           __bfloat162float(b[w * 256 + j * 16 + k]);
					ref += p;
					mag += fabs(p);
				}
				double err = fabs(d[w * 320 + i * 20 + j] - (2.0 * ref - 1.0));
				double bound = 2.0 * 17 * 0x1p-24 * mag + 0x1p-23 * fabs(2.0 * ref - 1.0);
				worst = fmax(worst, err / bound);
				fills &= f[w * 256 + i * 16 + j] == 0.75f;
			}
	printf("  bf16 m16n16k16: largest error / bound %.3g\n", worst);
	expect(worst <= 1.0, "bf16 16x16x16 mma + elementwise, per warp, against a plain loop");
	expect(fills, "fill_fragment + store_matrix_sync");
	cudaFree(da); cudaFree(db); cudaFree(dc); cudaFree(dd); cudaFree(df);
}

static void test_half(void)
{
	static __half a[32 * 16], b[16 * 8];
	static float d[32 * 8];
	unsigned s = 11;
	for (auto &x : a) x = __float2half(urand(&s));
	for (auto &x : b) x = __float2half(urand(&s));
	__half *da = dev(a, 512), *db = dev(b, 128);
	float *dd = dev(d, 256);
	cuemu_launch_of("k_half", k_half, dim3(1), dim3(32), 0, 0)(da, db, dd);
	get(d, dd, 256);
	double worst = 0.0;
	for (int i = 0; i < 32; i++)
		for (int j = 0; j < 8; j++) {
			double ref = 0.0, mag = 0.0;
			for (int k = 0; k < 16; k++) {
				double p = (double)__half2float(a[k * 32 + i]) * __half2float(b[k * 8 + j]);
				ref += p;
				mag += fabs(p);
			}
			worst = fmax(worst, fabs(d[j * 32 + i] - ref) / (17 * 0x1p-24 * mag + 1e-30));
		}
	printf("  half m32n8k16: largest error / bound %.3g\n", worst);
	expect(worst <= 1.0, "half 32x8x16 mma, col-major / row-major operands, against a plain loop");
	cudaFree(da); cudaFree(db); cudaFree(dd);
}

/* the misuse how ends a child process with SIGABRT */
static void test_bad(int how, const char *what)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (!freopen("/dev/null", "w", stderr)) _exit(2);
		__nv_bfloat16 *da = dev<__nv_bfloat16>(NULL, 16 * 32 + 16);
		cuemu_launch_of("k_bad", k_bad, dim3(1), dim3(32), 0, 0)(da, how);
		cudaStreamSynchronize(0);
		_exit(0);
	}
	int st = 0;
	expect(pid > 0 && waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, what);
}

int main(void)
{
	test_conversions();
	test_bf16();
	test_half();
	test_bad(0, "mma_sync by half a warp ends the process");
	test_bad(1, "load_matrix_sync with a different pointer per lane ends the process");
	test_bad(2, "load_matrix_sync of a pointer off 32 bytes ends the process");
	test_bad(3, "load_matrix_sync with ldm not a multiple of 16 bytes ends the process");
	return failures ? 1 : 0;
}
