/* golden_json.h - test helper: a fixture's expected.json and its tolerances.
 *
 * The fixtures' expected.json is written by Python and may hold the bare
 * token Infinity (not JSON), which jansson rejects; golden_json_load reads
 * the file and turns such tokens into +-1e308 before parsing.
 */
#ifndef ESMBATCH_GOLDEN_JSON_H
#define ESMBATCH_GOLDEN_JSON_H

#include <stdint.h>

#include <jansson.h>

#include "io/safetensors.h"

/* A fixture under TEST_DATA: its expected.safetensors and expected.json.
 * 0, or -1 (reason printed) with both NULL; the caller closes both. */
int golden_open(const char *fixture, safetensors_t **exp, json_t **json);
/* parsed expected.json, or NULL (reason printed to stderr) */
json_t *golden_json_load(const char *path);
/* the entry of sequences[] whose "name" is name, or NULL */
json_t *golden_json_seq(json_t *root, const char *name);
/* The golden tolerance (docs/testing.md; this is its C side, Python's is
 * tools/check_dump.py): for tensor of one sequence entry 10 x
 * fp32_vs_fp64_max_abs_diff, at least 1e-5 (NaN for a NaN figure);
 * negative when the entry has no figure for that tensor */
double golden_json_tol(json_t *seq, const char *tensor);

/* max |got - expected| against tensor SEQ/TENSOR of expected.safetensors,
 * NaN when either holds a NaN; negative when the tensor is absent or has
 * another element count */
double golden_max_diff(const safetensors_t *exp, const char *seq, const char *tensor,
                       const float *got, int64_t n);
/* golden_max_diff within golden_json_tol of seqj (diff <= tol, false when
 * either is NaN); prints one line with the ratio diff / tolerance and
 * returns 1 when it passes, 0 otherwise */
int golden_check(const safetensors_t *exp, json_t *seqj, const char *seq, const char *tensor,
                 const float *got, int64_t n);
/* a fixture sequence as the engine is fed it (the fixture README: lower-case
 * letters are fed as X); malloc'd, caller frees; NULL when out of memory */
char *golden_sequence(const char *s);
/* tensor SEQ/TENSOR of expected.safetensors as floats (malloc'd, caller
 * frees) and its element count in *numel (may be NULL); NULL when absent */
float *golden_f32(const safetensors_t *exp, const char *seq, const char *tensor, int64_t *numel);

#endif
