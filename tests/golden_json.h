/* golden_json.h - test helper: a fixture's expected.json and its tolerances.
 *
 * The fixtures' expected.json is written by Python and may hold the bare
 * token Infinity (not JSON), which jansson rejects; golden_json_load reads
 * the file and turns such tokens into +-1e308 before parsing.
 */
#ifndef ESMBATCH_GOLDEN_JSON_H
#define ESMBATCH_GOLDEN_JSON_H

#include <jansson.h>

/* parsed expected.json, or NULL (reason printed to stderr) */
json_t *golden_json_load(const char *path);
/* the entry of sequences[] whose "name" is name, or NULL */
json_t *golden_json_seq(json_t *root, const char *name);
/* tolerance for tensor of one sequence entry: 10 x fp32_vs_fp64_max_abs_diff,
 * at least 1e-5; negative when the entry has no figure for that tensor */
double golden_json_tol(json_t *seq, const char *tensor);

#endif
