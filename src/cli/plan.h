/* plan.h (prefix plan_) - `esmbatch plan`: read the input, print per length bucket
 * the records, residues, longest and quota (from --quota-table) as TSV on
 * stdout.  The per-device plan joins it with the scheduler. */
#ifndef ESMBATCH_CLI_PLAN_H
#define ESMBATCH_CLI_PLAN_H

#include <stdio.h>

#include "cli/options.h"

/* Returns a process exit code (EXIT_* in options.h). */
int plan_main(const opt_t *o, FILE *out);

#endif
