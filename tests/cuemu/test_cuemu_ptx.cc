/* test_cuemu_ptx.cc - the emulator's PTX primitives (cuemu_ptx.h, used by
 * kernels/mma.cuh) against fragments worked out by hand from the PTX
 * ISA's layouts: one mma.m16n8k16 whose every lane holds distinct values
 * (integers, so every sum is exact and compared exactly), ldmatrix x2 / x4
 * plain and transposed, cp.async with its zero fill, commit_group and
 * wait_group (NaN until waited for); and the misuses a card punishes end
 * the process.  Built like the kernels (g++ -include cuemu.h). */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuemu_check.h"

/* the test matrices: A[r][k] = 16 r + k, B[k][n] = 8 k + n, C[r][n] =
 * (8 r + n) / 2, all exact in bf16 / fp32; D = A B + C in closed form:
 * sum_k (16 r + k)(8 k + n) = 15360 r + 256 r n + 9920 + 120 n */
static float Aof(int r, int k) { return (float)(16 * r + k); }
static float Bof(int k, int n) { return (float)(8 * k + n); }
static float Cof(int r, int n) { return 0.5f * (float)(8 * r + n); }
static float Dof(int r, int n) { return 15360.0f * r + 256.0f * r * n + 9920.0f + 120.0f * n + Cof(r, n); }

static uint32_t pair(float lo, float hi)
{
	return (uint32_t)__float2bfloat16(lo).x | (uint32_t)__float2bfloat16(hi).x << 16;
}

/* each lane's registers from regs: a [32][4], b [32][2], c [32][4]; d [32][4] */
static void k_mma(const uint32_t *a, const uint32_t *b, const float *c, float *d)
{
	int l = threadIdx.x;
	uint32_t ra[4], rb[2];
	float rc[4];
	for (int i = 0; i < 4; i++) ra[i] = a[4 * l + i], rc[i] = c[4 * l + i];
	for (int i = 0; i < 2; i++) rb[i] = b[2 * l + i];
	cu_mma_16816_bf16(rc, ra, rb, rc);
	for (int i = 0; i < 4; i++) d[4 * l + i] = rc[i];
}

static void test_mma(void)
{
	static uint32_t a[32 * 4], b[32 * 2];
	static float c[32 * 4], d[32 * 4];
	/* lane l = 4 g + t: a0 rows g, cols 2t, 2t+1; a1 row g + 8; a2 cols
	 * + 8; a3 both; b0 rows 2t, 2t+1 of column g, b1 rows + 8; c0, c1 row
	 * g cols 2t, 2t+1; c2, c3 row g + 8 */
	for (int l = 0; l < 32; l++) {
		int g = l / 4, t = l % 4;
		a[4 * l + 0] = pair(Aof(g, 2 * t), Aof(g, 2 * t + 1));
		a[4 * l + 1] = pair(Aof(g + 8, 2 * t), Aof(g + 8, 2 * t + 1));
		a[4 * l + 2] = pair(Aof(g, 2 * t + 8), Aof(g, 2 * t + 9));
		a[4 * l + 3] = pair(Aof(g + 8, 2 * t + 8), Aof(g + 8, 2 * t + 9));
		b[2 * l + 0] = pair(Bof(2 * t, g), Bof(2 * t + 1, g));
		b[2 * l + 1] = pair(Bof(2 * t + 8, g), Bof(2 * t + 9, g));
		c[4 * l + 0] = Cof(g, 2 * t);
		c[4 * l + 1] = Cof(g, 2 * t + 1);
		c[4 * l + 2] = Cof(g + 8, 2 * t);
		c[4 * l + 3] = Cof(g + 8, 2 * t + 1);
	}
	uint32_t *da = dev(a, 128), *db = dev(b, 64);
	float *dc = dev(c, 128), *dd = dev<float>(NULL, 128);
	cuemu_launch_of("k_mma", k_mma, dim3(1), dim3(32), 0, 0)(da, db, dc, dd);
	get(d, dd, 128);
	int ok = 1;
	for (int l = 0; l < 32; l++) {
		int g = l / 4, t = l % 4;
		ok &= d[4 * l + 0] == Dof(g, 2 * t) && d[4 * l + 1] == Dof(g, 2 * t + 1) &&
		      d[4 * l + 2] == Dof(g + 8, 2 * t) && d[4 * l + 3] == Dof(g + 8, 2 * t + 1);
	}
	expect(ok, "mma m16n8k16: every lane's d exact against D = A B + C in closed form");
	/* by hand: lane 0 d0 = D[0][0] = 9920; lane 5 (g 1, t 1) d0 = D[1][2] =
	 * 15360 + 512 + 9920 + 240 + 5; lane 31 (g 7, t 3) d3 = D[15][7] */
	expect(d[0] == 9920.0f && d[20] == 26037.0f &&
	       d[127] == 15360.0f * 15 + 256.0f * 105 + 9920.0f + 840.0f + 63.5f,
	       "mma m16n8k16: lanes 0, 5 and 31 as worked out by hand");
	cudaFree(da); cudaFree(db); cudaFree(dc); cudaFree(dd);
}

/* four 8 x 8 b16 matrices in shared memory, element (m, r, c) = 64 m + 8 r
 * + c at row stride 24 (48 bytes); out [32][12]: each lane's x4, x4.trans,
 * x2 and x2.trans registers */
static void k_ldm(uint32_t *out)
{
	__shared__ uint16_t s[4 * 8 * 24];
	int l = threadIdx.x;
	for (int e = l; e < 4 * 8 * 8; e += 32) s[(e / 8) * 24 + e % 8] = (uint16_t)e;
	__syncthreads();
	const uint16_t *row = s + l * 24;   /* lane 8 m + r: row r of matrix m */
	cu_ldmatrix_x4(out + 12 * l, row);
	cu_ldmatrix_x4_trans(out + 12 * l + 4, row);
	cu_ldmatrix_x2(out + 12 * l + 8, l < 16 ? row : s + 8 * 24);
	cu_ldmatrix_x2_trans(out + 12 * l + 10, l < 16 ? row : s + 8 * 24);
}

static void test_ldmatrix(void)
{
	static uint32_t out[32 * 12];
	uint32_t *d = dev<uint32_t>(NULL, 32 * 12);
	cuemu_launch_of("k_ldm", k_ldm, dim3(1), dim3(32), 0, 0)(d);
	get(out, d, 32 * 12);
	int ok = 1, okt = 1, ok2 = 1;
	for (int l = 0; l < 32; l++) {
		int g = l / 4, t = l % 4;
		for (int m = 0; m < 4; m++) {
			uint32_t e = 64 * m + 8 * g + 2 * t, et = 64 * m + 8 * (2 * t) + g;
			ok &= out[12 * l + m] == (e | (e + 1) << 16);
			okt &= out[12 * l + 4 + m] == (et | (et + 8) << 16);
			if (m < 2)
				ok2 &= out[12 * l + 8 + m] == (e | (e + 1) << 16) &&
				       out[12 * l + 10 + m] == (et | (et + 8) << 16);
		}
	}
	/* by hand: lane 6 (g 1, t 2) of x4 register 3 holds (m 3, r 1, c 4, 5)
	 * = 204, 205; of .trans (r 4, 5, c 1) = 225, 233 */
	expect(out[12 * 6 + 3] == (204u | 205u << 16) && out[12 * 6 + 7] == (225u | 233u << 16),
	       "ldmatrix: lane 6's x4 register 3, plain and .trans, as worked out by hand");
	expect(ok, "ldmatrix x4: every lane row g, columns 2t, 2t+1 of each matrix");
	expect(okt, "ldmatrix x4.trans: every lane the same of each matrix's transpose");
	expect(ok2, "ldmatrix x2 and x2.trans: the first two matrices, lanes 16-31's addresses unused");
}

/* each lane copies 16 bytes of src [32][4] to shared memory in two groups
 * (words 0-1 of its row zero-filled past 8 bytes; then 4 words by 4-byte
 * copies); out [32][6]: NaN seen before any wait, group 1 after
 * wait_group 1 while group 2 is NaN, everything after wait_group 0 */
static void k_cp(const float *src, float *out)
{
	__shared__ float s[32 * 8];
	int l = threadIdx.x;
	float *mine = s + 8 * l;
	cu_cp_async_16(mine, src + 4 * l, 8);
	cu_cp_async_commit();
	for (int i = 0; i < 4; i++) cu_cp_async_4(mine + 4 + i, src + 4 * l + i, 4);
	cu_cp_async_commit();
	out[6 * l] = mine[0];
	cu_cp_async_wait<1>();
	out[6 * l + 1] = mine[0] + mine[1] + 16.0f * (mine[2] + mine[3]);
	out[6 * l + 2] = mine[4];
	cu_cp_async_wait<0>();
	out[6 * l + 3] = mine[4];
	out[6 * l + 4] = mine[7];
	__syncthreads();
	out[6 * l + 5] = s[8 * ((l + 1) % 32) + 5];   /* another lane's, after the barrier */
}

static void test_cp_async(void)
{
	static float src[32 * 4], out[32 * 6];
	for (int i = 0; i < 32 * 4; i++) src[i] = (float)(i + 1);
	float *ds = dev(src, 128), *dout = dev<float>(NULL, 32 * 6);
	cuemu_launch_of("k_cp", k_cp, dim3(1), dim3(32), 0, 0)(ds, dout);
	get(out, dout, 32 * 6);
	int nan_before = 1, first = 1, nan_second = 1, all = 1;
	for (int l = 0; l < 32; l++) {
		nan_before &= isnan(out[6 * l]);
		first &= out[6 * l + 1] == src[4 * l] + src[4 * l + 1];
		nan_second &= isnan(out[6 * l + 2]);
		all &= out[6 * l + 3] == src[4 * l] && out[6 * l + 4] == src[4 * l + 3] &&
		       out[6 * l + 5] == src[4 * ((l + 1) % 32) + 1];
	}
	expect(nan_before, "cp.async: the destination reads NaN before any wait");
	expect(first, "cp.async: wait_group 1 completes the older group, 8 bytes read and 8 zero-filled");
	expect(nan_second, "cp.async: wait_group 1 leaves the latest group in flight (NaN)");
	expect(all, "cp.async: wait_group 0 completes everything, visible to the block after a barrier");
	cudaFree(ds); cudaFree(dout);
}

/* misuses: 0 mma by lanes 0-15 only, 1 ldmatrix by lanes 0-15 only, 2 an
 * ldmatrix row off 16 bytes, 3 ldmatrix of global memory, 4 cp.async to
 * a destination off 16 bytes, 5 a source off 16 bytes, 6 to global
 * memory, 7 a thread ending with a copy not waited for, 8 a copy waited
 * for before it was committed, 9 a copy of bytes past the end of the
 * source's allocation (g: 64 floats) */
static void k_bad(float *g, int how)
{
	__shared__ float s[64];
	uint32_t r[4] = { 0 }, b[2] = { 0 };
	float c[4] = { 0 };
	int l = threadIdx.x;
	if (how == 0 && l < 16) cu_mma_16816_bf16(c, r, b, c);
	if (how == 1 && l < 16) cu_ldmatrix_x4(r, s);
	if (how == 2) cu_ldmatrix_x4(r, s + 2);
	if (how == 3) cu_ldmatrix_x4(r, g);
	if (how == 4) cu_cp_async_16(s + 2, g, 16);
	if (how == 5) cu_cp_async_16(s, g + 1, 16);
	if (how == 6) cu_cp_async_16(g + 4, g, 16);
	if (how == 9) {
		cu_cp_async_16(s, g + 60, 16);   /* the allocation's last 16 bytes: no misuse */
		cu_cp_async_16(s + 4, g + 64, l == 0 ? 4 : 0);   /* lane 0: 4 bytes past it */
		cu_cp_async_commit();
		cu_cp_async_wait<0>();
	}
	if (how >= 7) {
		cu_cp_async_16(s + 4 * (l % 16), g, 16);
		if (how == 7) cu_cp_async_commit();
		cu_cp_async_wait<0>();
	}
	g[l] = c[0] + (float)r[0];
}

static void test_bad(int how, const char *what)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (!freopen("/dev/null", "w", stderr)) _exit(2);
		float *d = dev<float>(NULL, 64);
		cuemu_launch_of("k_bad", k_bad, dim3(1), dim3(32), 0, 0)(d, how);
		cudaStreamSynchronize(0);
		_exit(3);
	}
	int st = 0;
	int aborted = pid > 0 && waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
	expect(how == 7 ? pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 3 : aborted, what);
}

int main(void)
{
	test_mma();
	test_ldmatrix();
	test_cp_async();
	test_bad(0, "mma by half a warp ends the process");
	test_bad(1, "ldmatrix by half a warp ends the process");
	test_bad(2, "ldmatrix of a row off 16 bytes ends the process");
	test_bad(3, "ldmatrix of global memory ends the process");
	test_bad(4, "cp.async to a destination off 16 bytes ends the process");
	test_bad(5, "cp.async from a source off 16 bytes ends the process");
	test_bad(6, "cp.async to global memory ends the process");
	test_bad(8, "a thread ending with a copy never committed, so never waited for, ends the process");
	test_bad(9, "cp.async of bytes past its source's allocation ends the process");
	test_bad(7, "the same copy committed and waited for is no misuse");
	return failures ? 1 : 0;
}
