/* golden_json.c - see golden_json.h. */
#include "golden_json.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the golden tolerance (docs/testing.md): 10 x the fp32-vs-fp64 figure,
 * at least 1e-5 */
#define GOLDEN_TOL_FACTOR 10.0
#define GOLDEN_TOL_FLOOR  1e-5

json_t *golden_json_load(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "%s: cannot open\n", path);
		return NULL;
	}
	char *buf = NULL;
	long size = -1;
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0)
		buf = malloc((size_t)size + 1);
	size_t n = buf ? fread(buf, 1, (size_t)size, f) : 0;
	fclose(f);
	if (!buf || n != (size_t)size) {
		fprintf(stderr, "%s: cannot read\n", path);
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	/* Infinity outside strings -> 1e308, space-padded to the same length */
	int in_str = 0;
	for (size_t i = 0; i < n; i++) {
		if (in_str) {
			if (buf[i] == '\\')
				i++;
			else if (buf[i] == '"')
				in_str = 0;
		} else if (buf[i] == '"') {
			in_str = 1;
		} else if (strncmp(buf + i, "Infinity", 8) == 0) {
			memcpy(buf + i, "1e308   ", 8);
			i += 7;
		}
	}
	json_error_t err;
	json_t *root = json_loads(buf, 0, &err);
	free(buf);
	if (!root)
		fprintf(stderr, "%s:%d: %s\n", path, err.line, err.text);
	return root;
}

char *golden_sequence(const char *s)
{
	char *r = strdup(s);
	for (char *p = r; p && *p; p++) *p = islower((unsigned char)*p) ? 'X' : *p;
	return r;
}

int golden_open(const char *fixture, safetensors_t **exp, json_t **json)
{
	char path[1024];

	snprintf(path, sizeof path, "%s/%s/expected.safetensors", TEST_DATA, fixture);
	*exp = safetensors_open(path);
	snprintf(path, sizeof path, "%s/%s/expected.json", TEST_DATA, fixture);
	*json = *exp ? golden_json_load(path) : NULL;
	if (*exp && *json) return 0;
	safetensors_close(*exp);
	*exp = NULL;
	return -1;
}

json_t *golden_json_seq(json_t *root, const char *name)
{
	json_t *seqs = json_object_get(root, "sequences");
	size_t i;
	json_t *s;
	json_array_foreach(seqs, i, s) {
		const char *nm = json_string_value(json_object_get(s, "name"));
		if (nm && strcmp(nm, name) == 0)
			return s;
	}
	return NULL;
}

double golden_json_tol(json_t *seq, const char *tensor)
{
	json_t *d = json_object_get(json_object_get(seq, "fp32_vs_fp64_max_abs_diff"), tensor);
	if (!json_is_number(d))
		return -1.0;
	double t = GOLDEN_TOL_FACTOR * json_number_value(d);
	return t < GOLDEN_TOL_FLOOR ? GOLDEN_TOL_FLOOR : t;   /* NaN stays NaN */
}

double golden_max_diff(const safetensors_t *exp, const char *seq, const char *tensor,
                       const float *got, int64_t n)
{
	char key[256];
	const safetensors_tensor_t *t;
	double *want, worst = 0.0;

	snprintf(key, sizeof key, "%s/%s", seq, tensor);
	if (!(t = safetensors_find(exp, key)) || t->numel != n) {
		fprintf(stderr, "%s: %s in expected (%lld values, engine has %lld)\n", key,
		        t ? "size differs" : "absent", t ? (long long)t->numel : 0LL, (long long)n);
		return -1.0;
	}
	if (!(want = malloc(sizeof *want * (n ? n : 1)))) return -1.0;
	safetensors_to_f64(t, want);
	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]);
		if (d > worst || d != d) worst = d;   /* a NaN sticks: nothing passes it */
	}
	free(want);
	return worst;
}

int golden_check(const safetensors_t *exp, json_t *seqj, const char *seq, const char *tensor,
                 const float *got, int64_t n)
{
	double tol = golden_json_tol(seqj, tensor);
	double d = golden_max_diff(exp, seq, tensor, got, n);
	int ok = tol > 0 && d >= 0 && d <= tol;

	fprintf(stderr, "%-8s %-28s max diff %.3g  tol %.3g  ratio %.3f  %s\n", seq, tensor, d, tol,
	        tol > 0 ? d / tol : -1.0, ok ? "ok" : "FAIL");
	return ok;
}

float *golden_f32(const safetensors_t *exp, const char *seq, const char *tensor, int64_t *numel)
{
	char key[256];
	const safetensors_tensor_t *t;
	float *v;

	snprintf(key, sizeof key, "%s/%s", seq, tensor);
	if (!(t = safetensors_find(exp, key)) || !(v = malloc(sizeof *v * (t->numel ? t->numel : 1))))
		return NULL;
	safetensors_to_f32(t, v);
	if (numel) *numel = t->numel;
	return v;
}
