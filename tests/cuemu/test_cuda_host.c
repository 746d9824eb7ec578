/* test_cuda_host.c - the CUDA backend's host traffic on the emulated card:
 * an upload and a gather's indices are staged, so the caller may overwrite
 * its buffer on return and the host does not wait for the stream; the
 * device is made current once per host thread, not once per op.  While a
 * graph is recorded, an upload, download, gather, sync and alloc are
 * refused (a captured copy out of a staging half would read it as it is
 * at replay), and the recorded ops run at each replay, not at recording.  The
 * emulator runs queued work only when the host synchronises, so a copy
 * queued straight from the caller's buffer (or a staging half reused too
 * early) would carry what the buffer holds at that later time.  A fetch
 * (weights in pinned host memory copied in on the copy stream) waits for
 * the work queued before it, which still reads the old contents, and the
 * work queued after fetch_wait reads the new ones; a fetch while recording
 * is refused. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda.h"
#include "compute/forward.h"
#include "cuemu_rt.h"

static int failures;

static void expect(int ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
	failures += !ok;
}

/* a recording of one fill of y[0] (y: device floats, tab: device table) */
static void check_graph(be_t *be, float *y, float *tab)
{
	float one = 7.0f, got = 0.0f;
	int32_t idx[1] = { 0 };
	void *g = NULL, *p = NULL;
	be_gather_t ga = { .y = y, .table = tab, .idx = idx, .rows = 1, .d = 1, .scale = 1.0f };
	be_fill_t f = { .x = y, .n = 1, .value = 3.0f };

	expect(be_supports(be, BE_OP_GRAPH), "the CUDA backend records graphs");
	expect(be->graph_begin(be) == 0, "recording begins");
	expect(be->fill(be, &f) == 0, "a fill recorded");
	expect(be->upload(be, y, &one, sizeof one) == -EBUSY, "an upload while recording refused");
	expect(be->download(be, &got, y, sizeof got) == -EBUSY, "a download while recording refused");
	expect(be->gather(be, &ga) == -EBUSY, "a gather while recording refused");
	expect(be->sync(be) == -EBUSY, "a sync while recording refused");
	expect(be->alloc(be, 256, &p) == -EBUSY && !p, "an alloc while recording refused");
	expect(be->graph_end(be, &g) == 0 && g, "recording ends");
	expect(be->upload(be, y, &one, sizeof one) == 0 && be->download(be, &got, y, sizeof got) == 0 &&
	       got == 7.0f, "the recorded fill did not run");
	expect(be->graph_run(be, g) == 0 && be->download(be, &got, y, sizeof got) == 0 && got == 3.0f,
	       "a replay runs it");
	be->graph_free(be, g);
}

/* fwd_graph_begin/end: a step recorded once and replayed on the same
 * placement and operands; a failure within a recorded step (an upload:
 * refused) ends the recording and discards it */
static void check_fwd_graph(be_t *be)
{
	fwd_t fx;
	float h[4] = { 1, 2, 3, 4 }, got[4];
	int ok = 1, skipped = 0;

	if (fwd_exec_begin(&fx, be, 4096)) exit(99);
	tensor_t t = fwd_new1(&fx, 4);
	for (int k = 0; k < 3; k++) {
		if (fwd_graph_begin(&fx, 0, &t, 1)) {
			skipped++;
			continue;
		}
		tensor_t u = fwd_new1(&fx, 4);   /* scratch, dropped: the same state after */
		be_fill_t f = { .x = t.d, .n = 4, .value = 5.0f + k };
		ok &= be->fill(be, &f) == 0;
		fwd_drop(&fx, &u);
		fwd_graph_end(&fx);
	}
	fwd_get(&fx, t, got);
	expect(ok && !fx.err && skipped == 2 && fx.graph_runs == 2 && got[3] == 5.0f,
	       "a step recorded once, replayed twice (its recorded fill, 5)");
	expect(fwd_graph_begin(&fx, 1, &t, 1) == 0, "a second step recorded");
	fwd_set(&fx, t, h);
	expect(fx.err != 0, "... whose upload fails the pass");
	fwd_graph_end(&fx);
	expect(fx.graphs[1].g == NULL && !fx.graphs[1].valid && be->sync(be) == 0,
	       "... and ends the recording, discarded");
	fwd_end(&fx);
}

/* be->fetch into w: [4] device floats, read by an axpby queued before it */
static void check_fetch(be_t *be, float *w, float *out)
{
	float old[4] = { 1, 2, 3, 4 }, got[4], got_w[4], *pin = NULL;
	be_axpby_t a = { .y = out, .x = w, .n = 4, .alpha = 1.0f, .beta = 0.0f };
	void *g = NULL;

	expect(be_supports(be, BE_OP_FETCH), "the CUDA backend fetches");
	if (be->host_alloc(be, sizeof old, (void **)&pin) || !pin) exit(99);
	for (int i = 0; i < 4; i++) pin[i] = 10.0f + i;
	expect(be->upload(be, w, old, sizeof old) == 0 && be->axpby(be, &a) == 0 &&
	       be->fetch(be, w, pin, sizeof old) == 0 && be->fetch_wait(be) == 0, "an axpby, then a fetch over its input");
	expect(be->download(be, got, out, sizeof got) == 0 && be->download(be, got_w, w, sizeof got_w) == 0 &&
	       got[0] == 1.0f && got[3] == 4.0f && got_w[0] == 10.0f && got_w[3] == 13.0f,
	       "the axpby read the old contents, the fetch left the new ones");
	a.y = w;
	a.x = out;
	a.alpha = 0.0f;
	a.beta = 2.0f;   /* w = 2 w */
	for (int i = 0; i < 4; i++) pin[i] = 20.0f + i;
	expect(be->fetch(be, w, pin, sizeof old) == 0 && be->fetch_wait(be) == 0 && be->axpby(be, &a) == 0 &&
	       be->download(be, got_w, w, sizeof got_w) == 0 && got_w[0] == 40.0f && got_w[3] == 46.0f,
	       "an axpby after fetch_wait reads what the fetch brought");
	expect(be->graph_begin(be) == 0 && be->fetch(be, w, pin, sizeof old) == -EBUSY &&
	       be->fetch_wait(be) == -EBUSY && be->graph_end(be, &g) == 0, "a fetch while recording refused");
	be->graph_free(be, g);
	be->host_free(be, pin);
}

int main(void)
{
	/* 5 MiB and a few floats: more than both staging halves together */
	const int64_t n = (5 << 20) / 4 + 7, rows = 3000, d = 5;
	float *h = malloc(sizeof *h * (size_t)n), *back = malloc(sizeof *back * (size_t)n);
	float table[4 * 5], *y = NULL, *x = NULL, got[3000 * 5];
	int32_t *idx = malloc(sizeof *idx * (size_t)rows);
	be_t *be = be_cuda_init(0);
	int ok = 1;

	if (!h || !back || !idx || !be) return 99;
	if (be->alloc(be, sizeof *h * (size_t)n, (void **)&x) || be->alloc(be, sizeof got, (void **)&y))
		return 99;
	for (int i = 0; i < 4 * 5; i++) table[i] = (float)i;
	float *tab = NULL;
	if (be->alloc(be, sizeof table, (void **)&tab) || be->upload(be, tab, table, sizeof table) ||
	    be->sync(be))
		return 99;

	long syncs = cuemu_stream_syncs(), sets = cuemu_set_devices();
	for (int64_t i = 0; i < n; i++) h[i] = (float)i;
	expect(be->upload(be, x, h, sizeof *h * (size_t)n) == 0, "upload of 5 MiB");
	memset(h, 0xff, sizeof *h * (size_t)n);   /* the caller's buffer again: NaN */
	for (int64_t r = 0; r < rows; r++) idx[r] = (int32_t)(r % 4);
	be_gather_t g = { .y = y, .table = tab, .idx = idx, .rows = rows, .d = (int)d, .scale = 2.0f };
	expect(be->gather(be, &g) == 0, "gather of 3000 rows");
	for (int64_t r = 0; r < rows; r++) idx[r] = 3 - (int32_t)(r % 4);   /* overwritten */
	be_fill_t f = { .x = y + rows * d - 1, .n = 1, .value = 0.5f };
	for (int k = 0; k < 100; k++) ok &= be->fill(be, &f) == 0;
	expect(ok, "100 fills");
	expect(cuemu_stream_syncs() == syncs, "no stream synchronisation for the upload, gather and fills");
	expect(cuemu_set_devices() == sets, "no cudaSetDevice on a thread whose device is current");

	expect(be->download(be, back, x, sizeof *back * (size_t)n) == 0, "download");
	ok = 1;
	for (int64_t i = 0; i < n; i++) ok &= back[i] == (float)i;
	expect(ok, "the upload carries what the buffer held when it was called");
	expect(be->download(be, got, y, sizeof got) == 0, "download of the gather");
	ok = 1;
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < d; j++)
			ok &= got[r * d + j] == (r == rows - 1 && j == d - 1 ? 0.5f
			                         : 2.0f * table[(r % 4) * d + j]);
	expect(ok, "the gather used the indices as they were when it was called");

	check_graph(be, y, tab);
	check_fetch(be, y, x);
	check_fwd_graph(be);
	be->free(be, x);
	be->free(be, y);
	be->free(be, tab);
	be->destroy(be);
	free(h);
	free(back);
	free(idx);
	return failures ? 1 : 0;
}
