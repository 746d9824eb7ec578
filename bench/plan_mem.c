/* plan_mem.c - the planner's memory figures of one fold per length, for
 * bench/gpu_model's memory column: the arena planned (one fold's
 * activations, as the scheduler reserves them), its peak of live tensors,
 * the weights' device bytes with the Linear matrices in bf16 and in fp32
 * (weights_bytes), and of those the bytes of the language model's
 * host-held layers at bf16 (LM_HOST of them, --stream-lm; esm2_host_bytes),
 * which the device does not hold.  Planning only, no backend (the
 * batched-GEMM form of the trunk the CUDA backend runs: no direct triangle
 * product; the host-held layers' slots at bf16); no weights are read.
 * Prints one line per length:
 *   L  chunk  arena  peak_allocated  weights_bf16  weights_fp32  host_bf16
 *
 *   bench/plan_mem MODEL L[,L...] [CHUNK [LM_HOST]]     (default 0 0)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/tokenizer.h"
#include "model/weights.h"

int main(int argc, char **argv)
{
	const char *path = argc > 2 ? argv[1] : NULL;
	size_t n = strlen(path ? path : "");
	int chunk = argc > 3 ? atoi(argv[3]) : 0, lm_host = argc > 4 ? atoi(argv[4]) : 0, rc = 0;
	weights_t *w;
	model_t m;

	if (!path) {
		fprintf(stderr, "usage: plan_mem MODEL L[,L...] [CHUNK [LM_HOST]]\n");
		return 2;
	}
	w = n > 5 && !strcmp(path + n - 5, ".json") ? weights_open_manifest(path) : weights_open(path);
	if (!w || model_load(&m, w, NULL, lm_host) < 0) return 1;
	printf("L\tchunk\tarena\tpeak_allocated\tweights_bf16\tweights_fp32\thost_bf16\n");
	for (const char *l = argv[2]; !rc && *l; l += strcspn(l, ",") + (l[strcspn(l, ",")] == ',')) {
		int L = atoi(l);
		char *seq = L > 0 ? malloc((size_t)L + 1) : NULL;
		model_run_t run = { .chunk = chunk };
		model_plan_t p = { 0 };
		tok_t t;
		if (!seq) {
			rc = 1;
			break;
		}
		for (int i = 0; i < L; i++) seq[i] = "ACDEFGHIKLMNPQRSTVWY"[i % 20];
		seq[L] = 0;
		if (tok_encode(&t, seq, m.cfg) < 0 || model_plan(&m, &t, &run, &p) < 0) rc = 1;
		else printf("%d\t%d\t%zu\t%zu\t%lld\t%lld\t%lld\n", L, chunk, p.arena, p.peak_live,
		            (long long)weights_bytes(w, &(be_t){ .weights_bf16 = 1 }),
		            (long long)weights_bytes(w, &(be_t){ 0 }),
		            (long long)esm2_host_bytes(&m.lm, &(be_t){ .weights_bf16 = 1 }));
		if (!rc) tok_free(&t);
		free(seq);
	}
	model_free(&m);
	weights_close(w);
	return rc;
}
