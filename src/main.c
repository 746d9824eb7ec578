/* main.c - esmbatch entry point: parse options, dispatch the subcommand.
 * All work lives in the library (libesmbatch.a); see options.h for exit codes. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <htslib/hts.h>
#ifdef HAVE_OPENBLAS_GET_CONFIG
#include <cblas.h>
#endif
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "backend/cpu_dnnl.h"
#include "cli/cache_cmd.h"
#include "cli/calibrate.h"
#include "cli/convert.h"
#include "cli/fold.h"
#include "cli/merge.h"
#include "util/log.h"
#include "cli/options.h"
#include "cli/plan.h"
#include "cli/report.h"

/* CUDA versions are MAJOR*1000 + MINOR*10 */
#define CUDA_VER(v) (v) / 1000, (v) % 1000 / 10

/* --version: the build's features, one "key: value" line each */
static int print_version(void)
{
	printf("%s %s\n", PACKAGE_NAME, PACKAGE_VERSION);
#ifdef HAVE_CUDA
	int rt = 0, drv = 0;
	if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = CUDART_VERSION;
	if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
	printf("cuda: runtime %d.%d (built with %d.%d), ", CUDA_VER(rt), CUDA_VER(CUDART_VERSION));
	if (drv) printf("driver %d.%d\n", CUDA_VER(drv));
	else printf("no driver (folds run on the CPU)\n");
	fputs("cuda architectures:", stdout);
	for (const char *a = ESMBATCH_CUDA_ARCHS; *a; a += *a == ',') {
		size_t n = strcspn(a, ",");
		printf(" sm_%.*s", (int)n, a);
		a += n;
	}
	printf(", PTX compute_%d\n", ESMBATCH_CUDA_PTX);
#else
	printf("cuda: no CUDA (built without it: folds run on the CPU)\n");
#endif
#ifdef HAVE_OPENBLAS_GET_CONFIG
	printf("blas: %s\n", openblas_get_config());
#else
	printf("blas: CBLAS (not OpenBLAS)\n");
#endif
#ifdef _OPENMP
	printf("openmp: yes\n");
#else
	printf("openmp: no\n");
#endif
	if (cpu_dnnl_version()) {
		const char *isa;
		int native = cpu_dnnl_probe(&isa);
		printf("onednn: %s (ISA %s: --precision bf16 on the CPU, %s)\n", cpu_dnnl_version(), isa,
		       native == 1 ? "its bf16 matmul where faster" : "widened to fp32");
	} else {
		printf("onednn: no (--precision bf16 on the CPU is refused)\n");
	}
	printf("htslib: %s\n", hts_version());
	return EXIT_OK;
}

/* OpenMP threads that wait for their partner (a barrier, the end of a
 * parallel region) sleep instead of spinning: libgomp spins about 300000
 * rounds (milliseconds) before it sleeps, and on a host shared with other
 * work a spinning thread takes the core its partner needs (measured: a
 * fold 4-7 times as long at a load average of 6-10 on 2 cores).  libgomp
 * reads its wait policy only at start-up, so the program sets
 * OMP_WAIT_POLICY=passive and executes itself once more; a policy the
 * user set (OMP_WAIT_POLICY or GOMP_SPINCOUNT), one thread (-t 1) or a
 * failed exec leave everything as it was. */
static void main_passive_wait(char **argv, const opt_t *o)
{
#ifdef _OPENMP
	char exe[4096];
	ssize_t n;

	if (o->threads == 1 || getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
	/* the file's own path, not /proc/self/exe: the process keeps its name */
	if ((n = readlink("/proc/self/exe", exe, sizeof exe - 1)) <= 0) return;
	exe[n] = '\0';
	if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
	execv(exe, argv);
	unsetenv("OMP_WAIT_POLICY");
#else
	(void)argv;
	(void)o;
#endif
}

int main(int argc, char **argv)
{
	opt_t o;
	int code;

	opt_init(&o);
	if (opt_parse(&o, argc, argv) < 0) {
		opt_free(&o);
		return EXIT_USAGE;
	}
	log_set_level(o.verbosity);
	if (o.help) {
		opt_usage(stdout);
		opt_free(&o);
		return EXIT_OK;
	}
	if (opt_validate(&o) < 0) {
		opt_free(&o);
		return EXIT_USAGE;
	}
	if (o.cmd == OPT_CMD_FOLD || o.cmd == OPT_CMD_CALIBRATE) main_passive_wait(argv, &o);
	switch (o.cmd) {
	case OPT_CMD_VERSION:
		code = print_version();
		if (code == EXIT_OK && o.weights_given) code = convert_describe(&o, stdout);
		break;
	case OPT_CMD_CONVERT:
		code = convert_main(&o);
		break;
	case OPT_CMD_MERGE:
		code = merge_main(&o);
		break;
	case OPT_CMD_PLAN:
		code = plan_main(&o, stdout);
		break;
	case OPT_CMD_CALIBRATE:
		code = calib_main(&o, stdout);
		break;
	case OPT_CMD_CACHE:
		code = cache_cmd_main(&o, stdout);
		break;
	case OPT_CMD_REPORT:
		code = report_main(&o);
		break;
	case OPT_CMD_FOLD:
	default:
		code = fold_main(&o);
		break;
	}
	opt_free(&o);
	if (fflush(stdout) != 0 && code == EXIT_OK) {
		log_error("cannot write to stdout");
		code = EXIT_FATAL;
	}
	return code;
}
