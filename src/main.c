/* main.c - esmbatch entry point: parse options, dispatch the subcommand.
 * All work lives in the library (libesmbatch.a); see options.h for exit codes. */
#include <stdio.h>

#include <htslib/hts.h>

#include "cli/calibrate.h"
#include "cli/convert.h"
#include "config.h"
#include "cli/fold.h"
#include "cli/merge.h"
#include "util/log.h"
#include "cli/options.h"
#include "cli/plan.h"
#include "cli/report.h"

static int print_version(void)
{
	printf("%s %s\n", PACKAGE_NAME, PACKAGE_VERSION);
#ifdef HAVE_CUDA
	printf("cuda: yes\n");
#else
	printf("cuda: no\n");
#endif
#ifdef _OPENMP
	printf("openmp: yes\n");
#else
	printf("openmp: no\n");
#endif
	printf("htslib: %s\n", hts_version());
	return EXIT_OK;
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
		code = plan_cmd_main(&o, stdout);
		break;
	case OPT_CMD_CALIBRATE:
		code = calib_main(&o, stdout);
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
