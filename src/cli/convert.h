/* convert.h (prefix convert_) - `esmbatch convert` (weights of any layout --weights reads into one
 * safetensors file and its config.json) and `esmbatch version --weights`
 * (what a weights file is: fingerprint, dtypes, parameters, which published
 * checkpoint it matches). */
#ifndef ESMBATCH_CLI_CONVERT_H
#define ESMBATCH_CLI_CONVERT_H

#include <stdio.h>

#include "cli/options.h"

/* esmbatch convert --weights IN... -o OUT.safetensors: the tensors under the
 * model's names and dtypes as stored; config.json written beside OUT unless
 * one is there.  Returns a process exit code (EXIT_* in options.h). */
int convert_main(const opt_t *o);

/* the weights' description on out, for `esmbatch version --weights W`;
 * returns a process exit code */
int convert_describe(const opt_t *o, FILE *out);

#endif
