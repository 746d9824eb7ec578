/* test_options.c - option defaults, parsing into opt_t, per-command checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/log.h"
#include "backend/cpu_dnnl.h"
#include "cli/options.h"

/* parse a NULL-terminated list of arguments (argv[0] added) */
static int parse(opt_t *o, const char *first, ...)
{
	char *argv[64];
	int argc = 0;
	va_list ap;
	const char *a;

	argv[argc++] = (char *)"esmbatch";
	va_start(ap, first);
	for (a = first; a; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	return opt_parse(o, argc, argv);
}

static void test_defaults(void **state)
{
	opt_t o;
	unsetenv("ESMBATCH_WEIGHTS");
	opt_init(&o);
	assert_int_equal(o.cmd, OPT_CMD_FOLD);
	assert_null(o.input);
	assert_null(o.outdir);
	assert_null(o.weights);
	assert_null(o.names);
	assert_null(o.devices);
	assert_null(o.quota_table);
	assert_null(o.dump_tensors);
	assert_int_equal(o.strict, 0);
	assert_int_equal(o.chunk_size, 0);
	assert_int_equal(o.num_recycles, -1);
	assert_int_equal(o.precision, BE_PREC_AUTO);
	assert_int_equal(o.pae, 0);
	assert_int_equal(o.formats, OPT_FMT_PDB);
	assert_int_equal(o.keep_linker_numbering, 0);
	assert_int_equal(o.no_split, 0);
	assert_int_equal(o.threads, 0);
	assert_int_equal(o.workers, 0);               /* auto */
	assert_int_equal(o.verbosity, LOG_INFO);
	assert_int_equal(parse(&o, NULL), 0);
	assert_int_equal(opt_validate(&o), -1);       /* fold needs -i */
	opt_free(&o);
}

static void test_env_weights(void **state)
{
	opt_t o;
	setenv("ESMBATCH_WEIGHTS", "/w/env.safetensors", 1);
	opt_init(&o);
	assert_string_equal(o.weights, "/w/env.safetensors");
	assert_int_equal(parse(&o, "-i", "a.fa", "-o", "out", NULL), 0);
	assert_int_equal(opt_validate(&o), 0);
	/* the option wins over the environment */
	assert_int_equal(parse(&o, "--weights", "/w/opt.st", NULL), 0);
	assert_string_equal(o.weights, "/w/opt.st");
	opt_free(&o);
	unsetenv("ESMBATCH_WEIGHTS");
}

static void test_all_options(void **state)
{
	opt_t o;
	opt_init(&o);
	assert_int_equal(parse(&o, "fold", "-i", "-", "--outdir", "o", "-w", "w.st",
	                       "--names", "n.txt", "--strict", "--chunk-size", "64",
	                       "--num-recycles", "0", "--precision", "bf16",
	                       "--devices", "cuda:0,cuda:1", "--dump-tensors", "d.st",
	                       "--pae", "--quota-table", "q.tsv", "--no-split",
	                       "-t", "8", "-vv", "-q", NULL), 0);
	assert_int_equal(o.cmd, OPT_CMD_FOLD);
	assert_string_equal(o.input, "-");
	assert_string_equal(o.outdir, "o");
	assert_string_equal(o.weights, "w.st");
	assert_string_equal(o.names, "n.txt");
	assert_int_equal(o.strict, 1);
	assert_int_equal(o.chunk_size, 64);
	assert_int_equal(o.num_recycles, 0);
	assert_int_equal(o.precision, BE_PREC_BF16);
	assert_string_equal(be_prec_name(o.precision), "bf16");
	assert_string_equal(o.devices, "cuda:0,cuda:1");
	assert_string_equal(o.dump_tensors, "d.st");
	assert_int_equal(o.pae, 1);
	assert_string_equal(o.quota_table, "q.tsv");
	assert_int_equal(o.no_split, 1);
	assert_int_equal(o.threads, 8);
	assert_int_equal(o.verbosity, LOG_INFO + 1);
	assert_int_equal(opt_validate(&o), 0);
	opt_free(&o);
}

static void test_commands(void **state)
{
	opt_t o;
	opt_init(&o);
	assert_int_equal(parse(&o, "plan", "-i", "x.fa", NULL), 0);
	assert_int_equal(o.cmd, OPT_CMD_PLAN);
	assert_int_equal(opt_validate(&o), 0);        /* plan needs no -o */
	opt_free(&o);
	opt_init(&o);
	assert_int_equal(parse(&o, "version", NULL), 0);
	assert_int_equal(o.cmd, OPT_CMD_VERSION);
	opt_free(&o);
	opt_init(&o);
	assert_int_equal(parse(&o, "--version", NULL), 0);
	assert_int_equal(o.cmd, OPT_CMD_VERSION);
	opt_free(&o);
	opt_init(&o);
	assert_int_equal(parse(&o, "calibrate", NULL), 0);
	assert_int_equal(o.cmd, OPT_CMD_CALIBRATE);
	assert_string_equal(opt_cmd_name(o.cmd), "calibrate");
	opt_free(&o);
	opt_init(&o);
	assert_int_equal(parse(&o, "plan", "-h", NULL), 0);
	assert_int_equal(o.help, 1);
	opt_free(&o);
}

static void test_errors(void **state)
{
	opt_t o;
	opt_init(&o);
	assert_int_equal(parse(&o, "fold-it", NULL), -1);
	assert_int_equal(parse(&o, "--bogus", NULL), -1);
	assert_int_equal(parse(&o, "-i", NULL), -1);
	assert_int_equal(parse(&o, "-i", "a", "stray", NULL), -1);
	assert_int_equal(parse(&o, "--precision", "fp64", NULL), -1);
	assert_int_equal(parse(&o, "--chunk-size", "-1", NULL), -1);
	assert_int_equal(parse(&o, "--chunk-size", "", NULL), -1);
	assert_int_equal(parse(&o, "--num-recycles", "65", NULL), -1);
	assert_int_equal(parse(&o, "--threads", "99999999999999", NULL), -1);
	assert_int_equal(parse(&o, "-o", "", NULL), -1);
	assert_int_equal(parse(&o, "--workers", "0", NULL), -1);
	assert_int_equal(parse(&o, "--workers", "Auto", NULL), -1);
	assert_int_equal(parse(&o, "--workers", "3", NULL), 0);
	assert_int_equal(o.workers, 3);
	assert_int_equal(parse(&o, "--workers", "auto", NULL), 0);
	assert_int_equal(o.workers, 0);
	/* --format: a comma list of pdb and cif, nothing else, nothing empty */
	assert_int_equal(parse(&o, "--format", "cif", NULL), 0);
	assert_int_equal(o.formats, OPT_FMT_CIF);
	assert_int_equal(parse(&o, "--format", "cif,pdb", "--keep-linker-numbering", NULL), 0);
	assert_int_equal(o.formats, OPT_FMT_PDB | OPT_FMT_CIF);
	assert_int_equal(o.keep_linker_numbering, 1);
	assert_int_equal(parse(&o, "--format", "pdb,", NULL), -1);
	assert_int_equal(parse(&o, "--format", ",cif", NULL), -1);
	assert_int_equal(parse(&o, "--format", "PDB", NULL), -1);
	assert_int_equal(parse(&o, "--format", "mmcif", NULL), -1);
	assert_int_equal(parse(&o, "--format", "", NULL), -1);
	/* -q cannot go below errors, -v not above debug */
	assert_int_equal(parse(&o, "-qqqqq", NULL), 0);
	assert_int_equal(o.verbosity, LOG_ERROR);
	assert_int_equal(parse(&o, "-vvvvvvv", NULL), 0);
	assert_int_equal(o.verbosity, LOG_DEBUG);
	opt_free(&o);
	opt_init(&o);
	assert_int_equal(parse(&o, "-i", "a.fa", "--weights", "w", NULL), 0);
	assert_int_equal(opt_validate(&o), -1);       /* fold needs -o */
	opt_free(&o);
}

/* bf16 and fp16 only where a CUDA device is named or may be found; bf16
 * on the CPU too in a build with oneDNN (ok -1: as cpu_dnnl_probe says) */
static void test_precision_devices(void **state)
{
	static const struct { const char *prec, *devices; int ok; } cases[] = {
		{ "bf16", "cpu", -1 }, { "fp16", "cpu", 0 }, { "fp16", "sim:8G", 0 },
		{ "bf16", "cuda:1", 1 }, { "bf16", "sim:8G", 1 },
		{ "fp16", NULL, 1 }, { "fp32", "cpu", 1 }, { "auto", "cpu", 1 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		int ok = cases[i].ok < 0 ? cpu_dnnl_probe(NULL) >= 0 : cases[i].ok;
		opt_t o;
		opt_init(&o);
		assert_int_equal(parse(&o, "plan", "-i", "a.fa", "--precision", cases[i].prec,
		                       cases[i].devices ? "--devices" : NULL, cases[i].devices, NULL), 0);
		assert_int_equal(opt_validate(&o), ok ? 0 : -1);
		opt_free(&o);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_env_weights),
		cmocka_unit_test(test_all_options),
		cmocka_unit_test(test_commands),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_precision_devices),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
