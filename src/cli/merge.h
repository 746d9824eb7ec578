/* merge.h (prefix merge_) - `esmbatch merge -o DIR`: one summary.tsv, in
 * input order, from the summaries that `fold --shard K/N` wrote into DIR
 * (summary.K-of-N.tsv), after checking from each shard's run.K-of-N.jsonl
 * that all folded the same input, with the same weights, into the same N
 * shards.  Idempotent: the same shards give the same summary.tsv. */
#ifndef ESMBATCH_CLI_MERGE_H
#define ESMBATCH_CLI_MERGE_H

#include "cli/options.h"

/* Returns a process exit code: EXIT_OK; EXIT_PARTIAL when records are
 * missing (a shard without its summary) or failed, listed in the log;
 * EXIT_FATAL when the shards disagree or a file cannot be read or
 * written; EXIT_BUSY when a run holds the directory. */
int merge_main(const opt_t *o);

#endif
