/* options.c - option defaults, getopt_long parsing, validation (see options.h). */
#include "cli/options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "backend/cpu_dnnl.h"
#include "backend/devices.h"
#include "sched/shard.h"

void opt_init(opt_t *o)
{
	const char *w = getenv("ESMBATCH_WEIGHTS"), *cache = getenv("ESMBATCH_CACHE");

	memset(o, 0, sizeof *o);
	o->cmd = OPT_CMD_FOLD;
	o->input = NULL;
	o->outdir = NULL;
	o->weights = (w && *w) ? strdup(w) : NULL;
	o->names = NULL;
	o->strict = 0;
	o->chunk_size = 0;
	o->num_recycles = -1;
	o->precision = BE_PREC_AUTO;
	o->devices = NULL;
	o->dump_tensors = NULL;
	o->pae = 0;
	o->formats = OPT_FMT_PDB;
	o->quota_table = NULL;
	o->verbosity = LOG_INFO;
	o->no_split = 0;
	o->no_dedup = 0;
	o->stream_lm = 0;
	o->threads = 0;
	o->workers = 0;   /* auto */
	o->cache = (cache && *cache) ? strdup(cache) : NULL;
}

void opt_free(opt_t *o)
{
	free(o->input);
	free(o->outdir);
	free(o->weights);
	free(o->lm_weights);
	free(o->names);
	free(o->devices);
	free(o->dump_tensors);
	free(o->quota_table);
	free(o->lengths);
	free(o->shard);
	free(o->cache);
	free(o->cache_action);
	memset(o, 0, sizeof *o);
}

static const char *cmd_names[] = { "fold", "plan", "calibrate", "version", "convert",
	                            "report", "merge", "cache" };

const char *opt_cmd_name(opt_cmd_t c)
{
	return (unsigned)c < sizeof cmd_names / sizeof *cmd_names ? cmd_names[c] : "?";
}

/* --help: usage and commands, the options, the exit status */
static const char opt_help_commands[] =
"Usage: esmbatch [fold] -i FILE|- -o DIR [--weights FILE] [options]\n"
"       esmbatch plan -i FILE|- [--weights FILE] [--devices LIST] [--quota-table TSV]\n"
"                     [--shards N]\n"
"       esmbatch merge -o DIR\n"
"       esmbatch calibrate --weights FILE [--lengths LIST] [-o TSV] [options]\n"
"       esmbatch convert --weights IN[,LM] [--lm-weights LM] -o OUT.safetensors\n"
"       esmbatch report -o DIR\n"
"       esmbatch cache stats|verify|prune -o DIR [--cache-max SIZE]\n"
"       esmbatch version [--weights W] | --version | help | --help\n"
"\n"
"Fold every protein of a FASTA file (plain, gzip, BGZF or stdin) with\n"
"ESMFold: one PDB per sequence plus a summary table.\n"
"\n"
"Commands:\n"
"  fold        fold the records (the default when no command is given)\n"
"  convert     write the weights (any layout --weights reads) as one\n"
"              safetensors file, with config.json beside it\n"
"  version     the version and build features; with --weights, the weights'\n"
"              fingerprint, dtypes, parameter count and the published\n"
"              checkpoint they match\n"
"  plan        print records, residues, longest and quota per length bucket;\n"
"              with --weights (or a manifest), the plan per device: budgets,\n"
"              how many run at once per bucket, expected peak, order of work\n"
"  calibrate   measure the memory per bucket and write a quota table\n"
"  report      rebuild DIR/report.html (the run report fold writes) from\n"
"              DIR's summary.tsv, run.jsonl and done.jsonl\n"
"  merge       one summary.tsv, in input order, from the shards' summaries in\n"
"              -o (fold --shard); exit 3 and a list when records are missing\n"
"              or failed; summary.partial.tsv while a shard is unfinished\n"
"  cache       the structure cache in -o DIR (fold --cache): stats, its\n"
"              entries and size; verify, every entry checked (exit 1 when one\n"
"              is corrupt); prune, corrupt entries and dead temporaries\n"
"              removed, and with --cache-max the least recently used\n"
"  help        print this help (as --help)\n"
"\n";

static const char opt_help_options[] =
"Options:\n"
"  -i, --input FILE        FASTA input; '-' reads stdin\n"
"  -o, --outdir DIR        output directory (fold, report); the table (calibrate)\n"
"  -w, --weights FILE      ESMFold weights: safetensors, or a PyTorch checkpoint\n"
"                          (pytorch_model.bin, esmfold_3B_v1.pt); a comma list\n"
"                          names the language model too (default: $ESMBATCH_WEIGHTS)\n"
"      --lm-weights FILE   fair-esm's language model (esm2_t36_3B_UR50D.pt) for\n"
"                          a --weights esmfold_3B_v1.pt\n"
"      --names FILE        only the records named in FILE (one per line);\n"
"                          uses FILE.fai random access when present\n"
"      --strict            a bad record is a fatal error\n"
"      --chunk-size N      trunk chunk size, 0 = auto (default 0)\n"
"      --num-recycles N    trunk recycles, -1 = model default (default -1)\n"
"      --precision P       auto, fp32, bf16 or fp16 (default auto); on the CPU\n"
"                          fp32, or bf16 in a build with oneDNN (--version)\n"
"      --devices LIST      cpu, cuda, cuda:N, sim:SIZE, comma-separated\n"
"                          (default: every visible CUDA device, else cpu)\n"
"      --dump-tensors FILE write intermediate tensors (safetensors)\n"
"      --pae               also write the predicted aligned error\n"
"      --format LIST       structure files: pdb, cif (mmCIF) or pdb,cif\n"
"                          (default pdb)\n"
"      --keep-linker-numbering\n"
"                          number a multimer's residues as the model does\n"
"                          (+512 per chain), not per chain from 1\n"
"      --quota-table TSV   bucket quota table (see buckets/README)\n"
"      --no-split          fail a sequence that fits nowhere, do not halve it\n"
"      --no-dedup          fold every record: by default a record whose\n"
"                          sequence an earlier record of the run folds is\n"
"                          written from that fold (plan: count each)\n"
"      --shard K/N|auto    fold only shard K of N of the input, balanced by\n"
"                          predicted cost, into -o shared with the other\n"
"                          shards; auto: from SLURM_ARRAY_TASK_ID/_MIN/_COUNT\n"
"      --shards N          plan: print the partition into N shards\n"
"  -t, --threads N         CPU threads, 0 = auto (default 0)\n"
"      --lengths LIST      calibrate at these lengths (default\n"
"                          256,512,768,1024,1344)\n"
"      --exclusive         calibrate for a job alone on its device (safety 1.3)\n"
"      --force             fold: refold records an earlier run into -o finished;\n"
"                          calibrate: overwrite another device's or weights' table\n"
"      --workers N|auto    fold workers per device; auto: as many as the\n"
"                          quotas of the input's commonest bucket allow\n"
"                          (at most 4 on a card, 1 on the CPU) (default auto)\n"
"      --stream-lm N       hold N of the language model's layers in host memory\n"
"                          and copy each to the card as a fold reaches it:\n"
"                          less device memory (157 MB a layer for esmfold_v1\n"
"                          at bf16), slower folds (CUDA; default 0)\n"
"      --cpu-memory SIZE   memory of the cpu device, weights included, e.g.\n"
"                          64G (default: 90% of the available memory)\n"
"      --cache DIR         a store of finished structures shared by runs (and\n"
"                          machines): a record found there is written from it,\n"
"                          a folded one added (default: $ESMBATCH_CACHE)\n"
"      --cache-max SIZE    the cache's size limit, e.g. 10G: the least recently\n"
"                          used entries are evicted (default: none)\n"
"  -v, --verbose           more log output (repeatable)\n"
"  -q, --quiet             less log output (repeatable)\n"
"  -h, --help              print this help and exit (also: esmbatch help)\n"
"  -V, --version           print the version, CUDA runtime and architectures,\n"
"                          and BLAS, and exit\n"
"\n";

static const char opt_help_status[] =
"Exit status: 0 all records done (whole or split); 1 fatal error (unreadable\n"
"or corrupt input, bad weights, I/O, a bad record under --strict) or stopped\n"
"by SIGINT/SIGTERM; 2 usage error or command not implemented; 3 finished,\n"
"but some records failed (merge: or are missing); 4 another run is writing\n"
"into the output directory (or shard).\n"
"\n"
"DIR/summary.tsv appears only once every record has a final outcome (folded,\n"
"split, or failed for a reason of its own); a run stopped by a signal, or\n"
"with records not run or outputs not written, writes DIR/summary.partial.tsv\n"
"instead; a run removes an earlier run's summary.tsv as it starts folding.\n";

void opt_usage(FILE *fp)
{
	fputs(opt_help_commands, fp);
	fputs(opt_help_options, fp);
	fputs(opt_help_status, fp);
}

enum {
	O_NAMES = 256, O_STRICT, O_CHUNK, O_RECYCLES, O_PREC, O_DEVICES,
	O_DUMP, O_PAE, O_QUOTA, O_NOSPLIT, O_LENGTHS, O_EXCLUSIVE, O_FORCE, O_WORKERS,
	O_CPUMEM, O_LMWEIGHTS, O_FORMAT, O_KEEPNUM, O_SHARD, O_SHARDS, O_CACHE, O_CACHEMAX,
	O_NODEDUP, O_STREAMLM
};

static const struct option long_opts[] = {
	{ "input",        required_argument, NULL, 'i' },
	{ "outdir",       required_argument, NULL, 'o' },
	{ "weights",      required_argument, NULL, 'w' },
	{ "lm-weights",   required_argument, NULL, O_LMWEIGHTS },
	{ "names",        required_argument, NULL, O_NAMES },
	{ "strict",       no_argument,       NULL, O_STRICT },
	{ "chunk-size",   required_argument, NULL, O_CHUNK },
	{ "num-recycles", required_argument, NULL, O_RECYCLES },
	{ "precision",    required_argument, NULL, O_PREC },
	{ "devices",      required_argument, NULL, O_DEVICES },
	{ "dump-tensors", required_argument, NULL, O_DUMP },
	{ "pae",          no_argument,       NULL, O_PAE },
	{ "format",       required_argument, NULL, O_FORMAT },
	{ "keep-linker-numbering", no_argument, NULL, O_KEEPNUM },
	{ "quota-table",  required_argument, NULL, O_QUOTA },
	{ "no-split",     no_argument,       NULL, O_NOSPLIT },
	{ "no-dedup",     no_argument,       NULL, O_NODEDUP },
	{ "stream-lm",    required_argument, NULL, O_STREAMLM },
	{ "threads",      required_argument, NULL, 't' },
	{ "lengths",      required_argument, NULL, O_LENGTHS },
	{ "exclusive",    no_argument,       NULL, O_EXCLUSIVE },
	{ "force",        no_argument,       NULL, O_FORCE },
	{ "workers",      required_argument, NULL, O_WORKERS },
	{ "cpu-memory",   required_argument, NULL, O_CPUMEM },
	{ "shard",        required_argument, NULL, O_SHARD },
	{ "shards",       required_argument, NULL, O_SHARDS },
	{ "cache",        required_argument, NULL, O_CACHE },
	{ "cache-max",    required_argument, NULL, O_CACHEMAX },
	{ "verbose",      no_argument,       NULL, 'v' },
	{ "quiet",        no_argument,       NULL, 'q' },
	{ "help",         no_argument,       NULL, 'h' },
	{ "version",      no_argument,       NULL, 'V' },
	{ NULL, 0, NULL, 0 }
};

/* integer option in [lo, hi]; 0 or -1 after logging */
static int parse_int(const char *opt, const char *s, int lo, int hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (!*s || *end || errno || v < lo || v > hi) {
		log_error("%s: expected an integer in [%d, %d], got '%s'",
		          opt, lo, hi, s);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* a size option (dev_parse_size), e.g. the example given; 0 or -1 after
 * logging */
static int parse_size(const char *opt, const char *s, const char *example, int64_t *out)
{
	if ((*out = dev_parse_size(s)) > 0) return 0;
	log_error("%s: expected a size from 1 byte to 1048576G such as %s, got '%s'", opt, example, s);
	return -1;
}

/* --format: a comma list of pdb and cif; 0 or -1 after logging */
static int parse_formats(const char *s, int *out)
{
	int f = 0;

	for (const char *p = s;; p++) {
		size_t n = strcspn(p, ",");
		if (n == 3 && !strncmp(p, "pdb", 3)) f |= OPT_FMT_PDB;
		else if (n == 3 && !strncmp(p, "cif", 3)) f |= OPT_FMT_CIF;
		else {
			log_error("--format: expected pdb, cif or pdb,cif, got '%s'", s);
			return -1;
		}
		p += n;
		if (!*p) break;
	}
	*out = f;
	return 0;
}

static int set_str(char **dst, const char *opt, const char *s)
{
	if (!*s) {
		log_error("%s: empty argument", opt);
		return -1;
	}
	free(*dst);
	*dst = strdup(s);
	if (!*dst) {
		log_error("out of memory");
		return -1;
	}
	return 0;
}

/* option c (getopt_long's return; on: its text, for messages) into o; -v
 * and -q counted in *vdelta.  0, or -1 after logging */
static int opt_one(opt_t *o, int c, const char *on, int *vdelta)
{
	switch (c) {
	case 'i': if (set_str(&o->input, "--input", optarg)) return -1; break;
	case 'o': if (set_str(&o->outdir, "--outdir", optarg)) return -1; break;
	case 'w':
		if (set_str(&o->weights, "--weights", optarg)) return -1;
		o->weights_given = 1;
		break;
	case O_LMWEIGHTS: if (set_str(&o->lm_weights, "--lm-weights", optarg)) return -1; break;
	case O_NAMES: if (set_str(&o->names, "--names", optarg)) return -1; break;
	case O_STRICT: o->strict = 1; break;
	case O_CHUNK:
		if (parse_int("--chunk-size", optarg, 0, 1 << 20, &o->chunk_size))
			return -1;
		break;
	case O_RECYCLES:
		if (parse_int("--num-recycles", optarg, -1, 64, &o->num_recycles))
			return -1;
		break;
	case O_PREC: {
		int i;
		for (i = 0; i < BE_PREC_COUNT; i++)
			if (strcmp(optarg, be_prec_name((be_prec_t)i)) == 0)
				break;
		if (i == BE_PREC_COUNT) {
			log_error("--precision: expected auto, fp32, bf16 or fp16, got '%s'",
			          optarg);
			return -1;
		}
		o->precision = (be_prec_t)i;
		break;
	}
	case O_DEVICES:
		if (set_str(&o->devices, "--devices", optarg)) return -1;
		if (!optarg[strspn(optarg, ",")]) {
			log_error("--devices: no device in '%s'", optarg);
			return -1;
		}
		break;   /* each element's form: opt_validate (dev_list_check) */
	case O_DUMP: if (set_str(&o->dump_tensors, "--dump-tensors", optarg)) return -1; break;
	case O_PAE: o->pae = 1; break;
	case O_FORMAT: if (parse_formats(optarg, &o->formats)) return -1; break;
	case O_KEEPNUM: o->keep_linker_numbering = 1; break;
	case O_QUOTA: if (set_str(&o->quota_table, "--quota-table", optarg)) return -1; break;
	case O_NOSPLIT: o->no_split = 1; break;
	case O_LENGTHS: if (set_str(&o->lengths, "--lengths", optarg)) return -1; break;
	case O_EXCLUSIVE: o->exclusive = 1; break;
	case O_FORCE: o->force = 1; break;
	case O_WORKERS:
		if (!strcmp(optarg, "auto")) o->workers = 0;
		else if (parse_int("--workers", optarg, 1, 256, &o->workers))
			return -1;
		break;
	case O_CPUMEM:
		if ((o->cpu_memory = dev_parse_size(optarg)) <= 0) {
			log_error("--cpu-memory: expected a size from 1 byte to 1048576G such as 64G, got '%s'",
			          optarg);
			return -1;
		}
		break;
	case O_SHARD: if (set_str(&o->shard, "--shard", optarg)) return -1; break;
	case O_CACHE: if (set_str(&o->cache, "--cache", optarg)) return -1; break;
	case O_NODEDUP: o->no_dedup = 1; break;
	case O_STREAMLM: if (parse_int("--stream-lm", optarg, 0, 1 << 16, &o->stream_lm)) return -1; break;
	case O_CACHEMAX: if (parse_size("--cache-max", optarg, "10G", &o->cache_max)) return -1; break;
	case O_SHARDS:
		if (parse_int("--shards", optarg, 1, SHARD_MAX, &o->shards)) return -1;
		break;
	case 't':
		if (parse_int("--threads", optarg, 0, 4096, &o->threads))
			return -1;
		break;
	case 'v': (*vdelta)++; break;
	case 'q': (*vdelta)--; break;
	case 'h': o->help = 1; break;
	case 'V': o->cmd = OPT_CMD_VERSION; break;
	case ':':
		/* a long option by the name given (its optopt is an
		 * internal value past 255), a short one by its letter */
		if (!strncmp(on, "--", 2) || optopt <= 0 || optopt > 255)
			log_error("option %s needs an argument (try --help)", on);
		else
			log_error("option -%c needs an argument (try --help)", optopt);
		return -1;
	default:
		if (optopt)
			log_error("unknown option -%c (try --help)", optopt);
		else
			log_error("unknown option %s (try --help)", on);
		return -1;
	}
	return 0;
}

int opt_parse(opt_t *o, int argc, char **argv)
{
	int first = 1, c, vdelta = 0;

	if (argc > 1 && strcmp(argv[1], "help") == 0) {   /* like --help */
		o->help = 1;
		return 0;
	}
	if (argc > 1 && argv[1][0] != '-') {
		size_t i;
		for (i = 0; i < sizeof cmd_names / sizeof *cmd_names; i++)
			if (strcmp(argv[1], cmd_names[i]) == 0)
				break;
		if (i == sizeof cmd_names / sizeof *cmd_names) {
			log_error("unknown command '%s' (try --help)", argv[1]);
			return -1;
		}
		o->cmd = (opt_cmd_t)i;
		first = 2;
		/* cache ACTION */
		if (o->cmd == OPT_CMD_CACHE && argc > 2 && argv[2][0] != '-') {
			if (set_str(&o->cache_action, "cache", argv[2])) return -1;
			first = 3;
		}
	}
	/* getopt over argv[first-1 ..]: the element at index 0 is skipped */
	argc -= first - 1;
	argv += first - 1;
	optind = 0;   /* glibc: full re-initialisation */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":i:o:w:t:vqhV", long_opts, NULL)) != -1) {
		const char *on = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
		if (opt_one(o, c, on, &vdelta) < 0) return -1;
	}
	if (optind < argc) {
		log_error("unexpected argument '%s' (try --help)", argv[optind]);
		return -1;
	}
	/* --lm-weights: the second file of the weights list */
	if (o->lm_weights) {
		char *both = NULL;
		if (!o->weights) {
			log_error("--lm-weights %s: give the folding model with --weights too", o->lm_weights);
			return -1;
		}
		if (asprintf(&both, "%s,%s", o->weights, o->lm_weights) < 0) return -1;
		free(o->weights);
		o->weights = both;
	}
	/* -v and -q count against each other, whatever their order */
	o->verbosity += vdelta;
	if (o->verbosity < LOG_ERROR) o->verbosity = LOG_ERROR;
	if (o->verbosity > LOG_DEBUG) o->verbosity = LOG_DEBUG;
	return 0;
}

int opt_validate(const opt_t *o)
{
	if (o->help || o->cmd == OPT_CMD_VERSION)
		return 0;
	if (dev_list_check(o->devices) < 0) return -1;
	/* only CUDA devices compute in bf16 or fp16, sim: cards in bf16 too,
	 * and the CPU in bf16 in a build with oneDNN (dev_precision) */
	int bf16 = o->devices && (strstr(o->devices, "sim:") || cpu_dnnl_probe(NULL) >= 0);
	if ((o->precision == BE_PREC_BF16 || o->precision == BE_PREC_FP16) && o->devices &&
	    !strstr(o->devices, "cuda") && !(o->precision == BE_PREC_BF16 && bf16)) {
		log_error("--precision %s: --devices %s computes in fp32%s only (use fp32%s or auto)",
		          be_prec_name(o->precision), o->devices, bf16 ? " or bf16" : "", bf16 ? ", bf16" : "");
		return -1;
	}
	if (o->cmd == OPT_CMD_CONVERT) {
		if (!o->weights || !o->outdir) {
			log_error("convert: give --weights IN and -o OUT.safetensors");
			return -1;
		}
		return 0;
	}
	if (o->shard) {
		shard_t sh;
		if (o->cmd != OPT_CMD_FOLD) {
			log_error("--shard: only for fold (plan takes --shards N)");
			return -1;
		}
		if (shard_parse(o->shard, &sh) < 0) return -1;
	}
	if (o->shards && o->cmd != OPT_CMD_PLAN) {
		log_error("--shards: only for plan (fold takes --shard K/N)");
		return -1;
	}
	if (o->cmd == OPT_CMD_REPORT) {
		if (!o->outdir) {
			log_error("report: give -o DIR, the output directory of a fold");
			return -1;
		}
		return 0;
	}
	if (o->cmd == OPT_CMD_CACHE) {
		const char *a = o->cache_action;
		if (!a || (strcmp(a, "stats") && strcmp(a, "verify") && strcmp(a, "prune"))) {
			log_error("cache: expected stats, verify or prune, got '%s'", a ? a : "nothing");
			return -1;
		}
		if (!o->outdir && !o->cache) {
			log_error("cache %s: give -o DIR, the cache directory", a);
			return -1;
		}
		return 0;
	}
	if (o->cache_max && !o->cache && o->cmd == OPT_CMD_FOLD) {
		log_error("--cache-max: give --cache DIR (or ESMBATCH_CACHE) too");
		return -1;
	}
	if (o->cmd == OPT_CMD_MERGE) {
		if (!o->outdir) {
			log_error("merge: give -o DIR, the output directory the shards folded into");
			return -1;
		}
		return 0;
	}
	if (o->cmd == OPT_CMD_CALIBRATE) {
		if (!o->weights) {
			log_error("calibrate: no weights: give --weights FILE or set ESMBATCH_WEIGHTS");
			return -1;
		}
		return 0;
	}
	if (!o->input) {
		log_error("%s: no input: give -i FILE (or -i - for stdin); try --help",
		          opt_cmd_name(o->cmd));
		return -1;
	}
	if (o->names && strcmp(o->input, "-") == 0)
		log_debug("--names with stdin: records are filtered while streaming");
	if (o->cmd == OPT_CMD_FOLD) {
		if (!o->outdir) {
			log_error("fold: no output directory: give -o DIR");
			return -1;
		}
		if (!o->weights) {
			log_error("fold: no weights: give --weights FILE or set ESMBATCH_WEIGHTS");
			return -1;
		}
	}
	return 0;
}
