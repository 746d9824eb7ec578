/* fold.h (prefix fold_) - the `fold` subcommand: the main job.  Implemented in fold.c
 * (model, scheduling, output); main.c only calls this after opt_validate(). */
#ifndef ESMBATCH_CLI_FOLD_H
#define ESMBATCH_CLI_FOLD_H

#include "cli/options.h"

/* Fold every record of o->input; returns a process exit code (EXIT_*). */
int fold_main(const opt_t *o);

#endif
