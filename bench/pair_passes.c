/* pair_passes.c - memory traffic of one folding-trunk block, in pair-tensor
 * passes (trunk_block_passes: the activation floats a block's ops read and
 * write, over L L c_z), for the two forms of the block: the CPU backend's
 * (direct triangle product) and the batched-GEMM form the CUDA backend
 * runs.  Planning only: no weights are read, nothing is folded.  Prints
 * one line per length and chunk:
 *   L  chunk  cpu  cuda
 *
 *   bench/pair_passes MODEL L[,L...] [CHUNK ...]    (default chunk 0)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/trunk.h"
#include "model/weights.h"

int main(int argc, char **argv)
{
	const char *path = argc > 2 ? argv[1] : NULL;
	size_t n = strlen(path ? path : "");
	weights_t *w;
	be_t *cpu, gemm_only;
	model_t m;
	int rc = 0;

	if (!path) {
		fprintf(stderr, "usage: pair_passes MODEL L[,L...] [CHUNK ...]\n");
		return 2;
	}
	w = n > 5 && !strcmp(path + n - 5, ".json") ? weights_open_manifest(path) : weights_open(path);
	if (!w || model_load(&m, w, NULL, 0) < 0) return 1;
	if (!(cpu = be_cpu_init(1))) return 1;
	gemm_only = *cpu;   /* the block as a backend without be->trimul runs it */
	gemm_only.trimul = NULL;
	printf("L\tchunk\tcpu\tcuda\n");
	for (const char *l = argv[2]; !rc && *l; l += strcspn(l, ",") + (l[strcspn(l, ",")] == ',')) {
		int L = atoi(l);
		for (int k = 3; k <= (argc > 3 ? argc - 1 : 3); k++) {
			int chunk = argc > 3 ? atoi(argv[k]) : 0;
			double pc = trunk_block_passes(m.cfg, cpu, L, chunk);
			double pg = trunk_block_passes(m.cfg, &gemm_only, L, chunk);
			if (pc < 0 || pg < 0) rc = 1;
			else printf("%d\t%d\t%.1f\t%.1f\n", L, chunk, pc, pg);
		}
	}
	be_free(cpu);
	model_free(&m);
	weights_close(w);
	return rc;
}
