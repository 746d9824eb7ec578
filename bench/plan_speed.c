/* plan_speed.c - how long planning takes: every length 1..N of a model
 * (weights file or manifest; no weights needed) planned at each chunk size
 * given, timed.  Prints one line per chunk size:
 *   chunk  lengths  seconds  arena_at_N  peak_allocated_at_N
 *
 *   bench/plan_speed MODEL [N [CHUNK ...]]     (default N 1344, chunk 0)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "model/tokenizer.h"
#include "model/weights.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : NULL;
	size_t n = strlen(path ? path : "");
	int N = argc > 2 ? atoi(argv[2]) : 1344, nchunk = argc > 3 ? argc - 3 : 1;
	weights_t *w;
	model_t m;
	char *seq;

	if (!path || N < 1) {
		fprintf(stderr, "usage: plan_speed MODEL [N [CHUNK ...]]\n");
		return 2;
	}
	w = n > 5 && !strcmp(path + n - 5, ".json") ? weights_open_manifest(path) : weights_open(path);
	if (!w || model_load(&m, w, NULL, 0) < 0 || !(seq = malloc(N + 1))) return 1;
	for (int i = 0; i < N; i++) seq[i] = "ACDEFGHIKLMNPQRSTVWY"[i % 20];
	printf("chunk\tlengths\tseconds\tarena_at_%d\tpeak_allocated_at_%d\n", N, N);
	for (int k = 0; k < nchunk; k++) {
		model_run_t run = { .chunk = argc > 3 ? atoi(argv[3 + k]) : 0 };
		model_plan_t p = { 0 };
		double t0 = now();
		for (int L = 1; L <= N; L++) {
			tok_t t;
			char c = seq[L];
			seq[L] = 0;
			if (tok_encode(&t, seq, m.cfg) < 0 || model_plan(&m, &t, &run, &p) < 0)
				return 1;
			seq[L] = c;
			tok_free(&t);
		}
		printf("%d\t%d\t%.3f\t%zu\t%zu\n", run.chunk, N, now() - t0, p.arena, p.peak_live);
	}
	free(seq);
	model_free(&m);
	weights_close(w);
	return 0;
}
