/* devices.c - devices and their backends (see devices.h). */
#include "backend/devices.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/num.h"
#include "util/status.h"
#include "util/sysmem.h"
#include "io/safetensors.h"
#include "backend/cpu_dnnl.h"
#include "backend/cuda.h"

/* a simulated card: the CPU backend's entries with a byte budget on
 * alloc/free and, like CUDA, no direct triangle product; `be` first so the
 * vtable's be_t* is the sim_t* */
typedef struct {
	be_t            be;
	be_t           *cpu;
	size_t          budget, used;
	pthread_mutex_t lock;
	char            name[48];
	char            numerics[288];   /* "sim " and the CPU's */
} dev_sim_t;

#define DEV_SIM_HDR 64   /* bytes before each block: its size; keeps 64-byte alignment */

static int dev_sim_alloc(be_t *be, size_t n, void **p)
{
	dev_sim_t *s = (dev_sim_t *)be;
	void *q = NULL;
	int ok;

	*p = NULL;
	pthread_mutex_lock(&s->lock);
	ok = s->used + n <= s->budget;
	if (ok) s->used += n;
	pthread_mutex_unlock(&s->lock);
	if (!ok) return STATUS_OOM;
	if (s->cpu->alloc(s->cpu, n + DEV_SIM_HDR, &q) < 0) {
		pthread_mutex_lock(&s->lock);
		s->used -= n;
		pthread_mutex_unlock(&s->lock);
		return STATUS_OOM;
	}
	*(size_t *)q = n;
	*p = (char *)q + DEV_SIM_HDR;
	return 0;
}

static void dev_sim_free(be_t *be, void *p)
{
	dev_sim_t *s = (dev_sim_t *)be;
	char *q;

	if (!p) return;
	q = (char *)p - DEV_SIM_HDR;
	pthread_mutex_lock(&s->lock);
	s->used -= *(size_t *)q;
	pthread_mutex_unlock(&s->lock);
	s->cpu->free(s->cpu, q);
}

static int dev_sim_mem_info(be_t *be, size_t *fr, size_t *total)
{
	dev_sim_t *s = (dev_sim_t *)be;

	pthread_mutex_lock(&s->lock);
	*fr = s->budget - s->used;
	*total = s->budget;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void dev_sim_destroy(be_t *be)
{
	dev_sim_t *s = (dev_sim_t *)be;

	be_free(s->cpu);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* A GEMM on a sim: card at bf16 (weights_bf16), as the card computes it:
 * both operands rounded to bf16 (a bf16 weight widened), fp32
 * accumulation, on the CPU backend; a GEMM asking for fp32 stays fp32. */
static int dev_sim_gemm(be_t *be, const be_gemm_t *g)
{
	dev_sim_t *s = (dev_sim_t *)be;

	if (g->prec == BE_PREC_FP32 && !g->a_bf16 && !g->b_bf16) return s->cpu->gemm(s->cpu, g);
	return cpu_dnnl_widened(s->cpu, g);
}

int64_t dev_parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	int64_t mult = 1, size;

	if (end == s) return -1;
	switch (*end) {
	case 'K': case 'k': mult = 1 << 10; end++; break;
	case 'M': case 'm': mult = 1 << 20; end++; break;
	case 'G': case 'g': mult = (int64_t)1 << 30; end++; break;
	default: break;
	}
	if (*end || num_to_i64(v * (double)mult, 0, DEV_SIZE_MAX, &size) < 0) return -1;
	return size;
}

int dev_check(const char *spec)
{
	int dev = 0, end = -1;

	if (!spec || !strcmp(spec, "cpu") || !strcmp(spec, "cuda")) return 0;
	if (!strncmp(spec, "sim:", 4)) {
		if (dev_parse_size(spec + 4) > 0) return 0;
		log_error("--devices %s: expected sim:SIZE, a size from 1 byte to 1048576G such as sim:24G", spec);
		return -1;
	}
	if (sscanf(spec, "cuda:%d%n", &dev, &end) == 1 && end > 5 && !spec[end] && dev >= 0) return 0;
	log_error("--devices %s: expected cpu, cuda, cuda:N or sim:SIZE", spec);
	return -1;
}

static be_t *dev_sim_open(const char *spec, int threads)
{
	int64_t size = dev_parse_size(spec + 4);
	dev_sim_t *s;
	be_t *cpu;

	if (!(cpu = be_cpu_init(threads))) return NULL;
	if (!(s = calloc(1, sizeof *s))) {
		be_free(cpu);
		return NULL;
	}
	s->be = *cpu;
	s->cpu = cpu;
	s->budget = (size_t)size;
	pthread_mutex_init(&s->lock, NULL);
	snprintf(s->name, sizeof s->name, "%s", spec);
	s->be.name = s->name;
	s->be.alloc = dev_sim_alloc;
	s->be.free = dev_sim_free;
	s->be.mem_info = dev_sim_mem_info;
	s->be.trimul = NULL;   /* planned and run as on a card: batched GEMMs, */
	s->be.weights_f16 = 0; /* weights in fp32 or bf16 */
	snprintf(s->numerics, sizeof s->numerics, "sim %s", cpu->numerics);
	s->be.numerics = s->numerics;
	s->be.destroy = dev_sim_destroy;
	return &s->be;
}

int dev_precision(be_t *be, be_prec_t prec)
{
	int rc, cpu;

	if (be->destroy == dev_sim_destroy && (prec == BE_PREC_BF16 || prec == BE_PREC_AUTO)) {
		/* a sim: card at bf16, a card's auto: weights and GEMMs as a card
		 * holds and runs them */
		be->weights_bf16 = 1;
		be->precision = be_prec_name(prec);
		be->gemm = dev_sim_gemm;
	}
	rc = be->weights_bf16 ? 0 : be_cpu_set_precision(be, prec);
	cpu = rc != -ENODEV;
	if (!cpu) rc = be_cuda_set_precision(be, prec);

	if (rc == -EINVAL && prec != BE_PREC_AUTO && prec != BE_PREC_FP32) {
		int bf16 = cpu && cpu_dnnl_probe(NULL) >= 0;
		log_error("--precision %s: device %s computes in fp32%s only (use fp32%s or auto)",
		          be_prec_name(prec), be->name, bf16 ? " or bf16" : "", bf16 ? ", bf16" : "");
		return -1;
	}
	if (rc < 0 && rc != -EINVAL) {
		log_error("--precision %s: device %s cannot be set up for it", be_prec_name(prec), be->name);
		return -1;
	}
	log_info("device %s: GEMM inputs %s, fp32 accumulation; %s; norms, softmax, attention, "
	         "structure geometry, the IPA point term, the triangle-multiplication biases and "
	         "the confidence heads in fp32", be->name, be->precision,
	         be->weights_bf16 ? "Linear weight matrices held in bf16 (biases, norm and embedding "
	         "weights in fp32)" : be->weights_f16 ? "weights in fp32 but the language model's "
	         "binary16 matrices, held as in the file and widened exactly as they are multiplied" :
	         "weights in fp32");
	return 0;
}

int dev_runnable(const char *spec)
{
	int dev = 0;

	if (!spec || strncmp(spec, "cuda", 4) != 0) return 0;
	if (strcmp(spec, "cuda") != 0 && sscanf(spec, "cuda:%d", &dev) != 1) return 0;   /* dev_open says */
	return be_cuda_check_arch(dev);
}

be_t *dev_open(const char *spec, int threads)
{
	be_t *be = NULL;

	if (dev_check(spec) < 0) return NULL;   /* logged */
	if (spec && !strncmp(spec, "sim:", 4)) {
		be = dev_sim_open(spec, threads);
	} else if (!spec || strcmp(spec, "cpu") != 0) {
		int dev = 0;
		if (spec) sscanf(spec, "cuda:%d", &dev);
		if (be_cuda_check_arch(dev) < 0) return NULL;   /* logged */
		be = be_cuda_init(dev);
		if (!be && spec) {
			log_error("--devices %s: no such CUDA device", spec);
			return NULL;
		}
	}
	if (!be && (!spec || !strcmp(spec, "cpu"))) be = be_cpu_init(threads);
	if (be) log_info("device: %s", be->name);
	return be;
}

int64_t dev_cpu_memory(int64_t cpu_memory)
{
	int64_t avail = sysmem_available();

	if (cpu_memory > 0) return cpu_memory;
	return avail > 0 ? avail / 10 * 9 : INT64_MAX / 4;
}

int64_t dev_budget(be_t *be, const char *spec, int64_t cpu_total, int64_t weights, int loaded)
{
	size_t fr, tot;
	int64_t b;

	if (be->mem_info && be->mem_info(be, &fr, &tot) == 0) {
		int64_t reserve = spec && !strncmp(spec, "sim:", 4) ? 0 :
			(int64_t)(tot / 20 < (512u << 20) ? tot / 20 : (512u << 20));
		b = (int64_t)fr - (loaded ? 0 : weights) - reserve;
	} else {
		b = cpu_total - weights;
	}
	return b > 0 ? b : 0;
}

int dev_split(const char *list, char ***specs)
{
	char *copy, *save = NULL, **v = NULL;
	int n = 0;

	*specs = NULL;
	if (!list) {
		/* every CUDA device this process sees, else the CPU (spec NULL) */
		int ncuda = be_cuda_count();
		if (!(v = calloc(ncuda ? ncuda : 1, sizeof *v))) return -1;
		for (int i = 0; i < ncuda; i++)
			if (asprintf(&v[i], "cuda:%d", i) < 0) {
				v[i] = NULL;
				dev_split_free(v, ncuda);
				return -1;
			}
		*specs = v;
		return ncuda ? ncuda : 1;
	}
	if (!(copy = strdup(list))) return -1;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char **nv = realloc(v, (n + 1) * sizeof *v);
		if (!nv || !(nv[n] = strdup(t))) {
			v = nv ? nv : v;
			dev_split_free(v, n);
			free(copy);
			return -1;
		}
		v = nv;
		n++;
	}
	free(copy);
	if (!n) {
		log_error("--devices: empty list");
		free(v);
		return -1;
	}
	*specs = v;
	return n;
}

static int dev_cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* the CUDA ordinal of "cuda" (0) or "cuda:N"; -1 when spec is neither */
static int dev_cuda_ordinal(const char *spec)
{
	char *end;
	long v;

	if (!strcmp(spec, "cuda")) return 0;
	if (strncmp(spec, "cuda:", 5) || spec[5] < '0' || spec[5] > '9') return -1;
	errno = 0;
	v = strtol(spec + 5, &end, 10);
	return *end || errno || v > INT_MAX ? -1 : (int)v;
}

int dev_list_check(const char *list)
{
	char **spec;
	int n, *ord, nord = 0, cpu = 0, rc = -1;

	if (!list) return 0;
	if ((n = dev_split(list, &spec)) < 0) return -1;
	if (!(ord = malloc(sizeof *ord * (size_t)n))) {
		log_error("--devices: out of memory");
		dev_split_free(spec, n);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const char *s = spec[i];
		if (dev_check(s) < 0) goto done;   /* logged */
		if (!strcmp(s, "cpu") && cpu++) {
			log_error("--devices %s: the cpu device is named twice (its memory is one budget: name it once)",
			          list);
			goto done;
		}
		if ((ord[nord] = dev_cuda_ordinal(s)) >= 0) nord++;
	}
	qsort(ord, (size_t)nord, sizeof *ord, dev_cmp_int);
	for (int i = 1; i < nord; i++)
		if (ord[i] == ord[i - 1]) {
			log_error("--devices %s: CUDA device %d is named twice (its memory is one budget: name it once)",
			          list, ord[i]);
			goto done;
		}
	rc = 0;
done:
	free(ord);
	dev_split_free(spec, n);
	return rc;
}

void dev_split_free(char **specs, int n)
{
	for (int i = 0; specs && i < n; i++) free(specs[i]);
	free(specs);
}
