/* options.h (prefix opt_) - command line: the one options struct, its defaults, parsing and
 * per-subcommand validation, and the process exit codes.
 *
 * Every default lives in opt_init().  opt_parse() never prints help or
 * exits: it records what was asked (cmd, help, version) and main.c acts.
 * Strings in opt_t are owned by it (copied from argv / the environment)
 * and released by opt_free().
 */
#ifndef ESMBATCH_CLI_OPTIONS_H
#define ESMBATCH_CLI_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"

/* Process exit codes (documented in README.md and the man page). */
enum {
	EXIT_OK      = 0,  /* done; every record folded (or planned) */
	EXIT_FATAL   = 1,  /* fatal error: unreadable / corrupt input, bad
	                      weights or quota table, I/O, a bad record under
	                      --strict */
	EXIT_USAGE   = 2,  /* usage error, or a subcommand not implemented */
	EXIT_PARTIAL = 3,  /* the run finished but some records failed */
	EXIT_BUSY    = 4   /* another run holds the output directory's lock */
};

/* Structure formats fold writes (opt_t.formats, a bit set). */
enum { OPT_FMT_PDB = 1, OPT_FMT_CIF = 2 };

typedef enum {
	OPT_CMD_FOLD = 0,  /* the default */
	OPT_CMD_PLAN,
	OPT_CMD_CALIBRATE,
	OPT_CMD_VERSION,
	OPT_CMD_CONVERT,
	OPT_CMD_REPORT,
	OPT_CMD_MERGE,
	OPT_CMD_CACHE
} opt_cmd_t;

typedef struct {
	opt_cmd_t  cmd;
	int        help;          /* -h/--help given: print usage, exit 0 */
	char      *input;         /* -i: FASTA path, "-" = stdin; NULL = unset */
	char      *outdir;        /* -o */
	char      *weights;       /* --weights, else $ESMBATCH_WEIGHTS; with
	                             --lm-weights: "WEIGHTS,LM" */
	char      *lm_weights;    /* --lm-weights */
	int        weights_given; /* --weights was on the command line */
	char      *names;         /* --names: file of record names to fold */
	int        strict;        /* --strict: a bad record is fatal */
	int        chunk_size;    /* --chunk-size: 0 = auto */
	int        num_recycles;  /* --num-recycles: -1 = model default */
	be_prec_t precision;     /* --precision */
	char      *devices;       /* --devices: NULL = all found, else e.g.
	                             "cpu", "cuda", "cuda:0,2" */
	char      *dump_tensors;  /* --dump-tensors FILE: intermediates out */
	int        pae;           /* --pae: also write the PAE matrix */
	int        formats;       /* --format: OPT_FMT_* bits (default PDB) */
	int        keep_linker_numbering; /* --keep-linker-numbering: a multimer's
	                             residues numbered as the model indexes them
	                             (+512 per chain), not per chain from 1 */
	char      *quota_table;   /* --quota-table TSV (see buckets/README) */
	int        verbosity;     /* log level: LOG_INFO, -v +1, -q -1 */
	int        no_split;      /* --no-split: fail instead of halving */
	int        no_dedup;      /* --no-dedup: fold every record, also those
	                             of a sequence folded in the run already */
	int        threads;       /* --threads: CPU threads, 0 = auto */
	char      *lengths;       /* --lengths: calibrate's comma-separated
	                             lengths; NULL = 256,512,768,1024,1344 */
	int        exclusive;     /* --exclusive: calibrate's safety 1.3 */
	int        force;         /* --force: fold refolds what an earlier run
	                             finished; calibrate may overwrite a table
	                             of another device or weights */
	int        workers;       /* --workers: fold workers per device, 0 = auto
	                             (default; sched_auto_workers) */
	int        stream_lm;     /* --stream-lm: language-model layers held in
	                             host memory, fetched as a fold needs them
	                             (esm2.h); 0 = none (default) */
	char      *shard;         /* --shard K/N or auto (shard.h); NULL: all */
	int        shards;        /* --shards N: plan's partition; 0 = none */
	int64_t    cpu_memory;    /* --cpu-memory: bytes the CPU device may hold,
	                             weights included; 0 = 90% of MemAvailable */
	char      *cache;         /* --cache DIR, else $ESMBATCH_CACHE: the store
	                             of finished structures; NULL: none */
	int64_t    cache_max;     /* --cache-max: its size limit; 0 = none */
	char      *cache_action;  /* the cache command's: stats, verify, prune */
} opt_t;

void opt_init(opt_t *o);          /* all defaults; reads ESMBATCH_WEIGHTS,
                                     ESMBATCH_CACHE */
void opt_free(opt_t *o);

/* Parse argv (argv[1] may name a subcommand).  Returns 0, or -1 after
 * logging one line on a usage error.  Reentrant for tests (resets getopt). */
int  opt_parse(opt_t *o, int argc, char **argv);
/* Check what o->cmd needs (fold: -i, -o, weights; plan: -i) and that
 * bf16 / fp16 are asked of CUDA devices only.  0 or -1 after logging one
 * line. */
int  opt_validate(const opt_t *o);

void        opt_usage(FILE *fp);
const char *opt_cmd_name(opt_cmd_t c);

#endif
