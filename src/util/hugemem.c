/* hugemem.c - large host buffers on transparent huge pages (hugemem.h). */
#include "config.h"

#include "util/hugemem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* 64 bytes before every buffer's data: how to give it back */
typedef struct {
	uint64_t magic;
	void    *base;   /* the malloc block or the mapping */
	size_t   len;    /* the mapping's length; 0: a malloc block */
	char     pad[40];
} hugemem_head_t;

#define HUGEMEM_MAGIC 0x6875676d656d3031ull   /* "hugmem01" */

const char *hugemem_mode(void)
{
	static const char *const modes[] = { "always", "madvise", "never" };
	const char *e = getenv("ESMBATCH_HUGEPAGES");
	char line[128];
	FILE *f;

	if (e && !strcmp(e, "0")) return "off";
	if (!(f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r"))) return "absent";
	if (!fgets(line, sizeof line, f)) line[0] = 0;
	fclose(f);
	/* the mode in force is the bracketed one: "always [madvise] never" */
	for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
		char want[16];
		snprintf(want, sizeof want, "[%s]", modes[i]);
		if (strstr(line, want)) return modes[i];
	}
	return "absent";
}

int hugemem_on(void)
{
	const char *m = hugemem_mode();
	return !strcmp(m, "always") || !strcmp(m, "madvise");
}

/* a mapping with room for the head below a 2 MiB boundary and n bytes
 * above it: data = base + 64 rounded up to 2 MiB */
static void *hugemem_map(size_t n, int advise)
{
	size_t len = sizeof(hugemem_head_t) + HUGEMEM_PAGE + n;
	char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED) return NULL;
	uintptr_t d = ((uintptr_t)base + sizeof(hugemem_head_t) + HUGEMEM_PAGE - 1) & ~(uintptr_t)(HUGEMEM_PAGE - 1);
	char *data = (char *)d;
	size_t whole = n / HUGEMEM_PAGE * HUGEMEM_PAGE;
#ifdef MADV_HUGEPAGE
	/* whole 2 MiB pages only: the head's page and the tail stay small */
	if (advise && whole) madvise(data, whole, MADV_HUGEPAGE);
#else
	(void)whole; (void)advise;
#endif
	hugemem_head_t *h = (hugemem_head_t *)(void *)(data - sizeof *h);
	h->magic = HUGEMEM_MAGIC;
	h->base = base;
	h->len = len;
	return data;
}

int hugemem_alloc(size_t n, void **p)
{
	void *base = NULL;

	*p = NULL;
	if (!n) n = 1;
	if (n > SIZE_MAX - HUGEMEM_PAGE - sizeof(hugemem_head_t)) return -1;
	if (n >= HUGEMEM_MIN) {
		*p = hugemem_map(n, hugemem_on());
		return *p ? 0 : -1;
	}
	if (posix_memalign(&base, 64, sizeof(hugemem_head_t) + n) != 0) return -1;
	hugemem_head_t *h = base;
	h->magic = HUGEMEM_MAGIC;
	h->base = base;
	h->len = 0;
	*p = h + 1;
	return 0;
}

void hugemem_free(void *p)
{
	if (!p) return;
	hugemem_head_t *h = (hugemem_head_t *)p - 1;
	void *base = h->base;
	size_t len = h->len;
	h->magic = 0;
	if (len) munmap(base, len);
	else free(base);
}
