/* dedup.c - the table of distinct sequences (see dedup.h): open
 * addressing on hash_bytes of each sequence's folded form, doubled when
 * half full.
 */
#include "sched/dedup.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "protein/residue.h"

typedef struct {
	char    *key;    /* the folded form (dedup_key); NULL: an empty slot */
	uint64_t h;
	int      rec;
} dedup_slot_t;

struct dedup {
	dedup_slot_t *slot;
	size_t        cap;   /* a power of two */
	int           n;
};

/* seq as the model folds it: every letter its residue type's (X for
 * those it has none of), ':' kept; malloc'ed, or NULL */
static char *dedup_key(const char *seq)
{
	size_t n = strlen(seq);
	char *k = malloc(n + 1);

	if (!k) return NULL;
	for (size_t i = 0; i < n; i++)
		k[i] = seq[i] == ':' ? ':' : residue_restypes[residue_aatype_of(seq[i])];
	k[n] = 0;
	return k;
}

dedup_t *dedup_init(void)
{
	dedup_t *d = calloc(1, sizeof *d);

	if (d && !(d->slot = calloc(d->cap = 64, sizeof *d->slot))) {
		free(d);
		return NULL;
	}
	return d;
}

void dedup_free(dedup_t *d)
{
	if (!d) return;
	for (size_t i = 0; i < d->cap; i++) free(d->slot[i].key);
	free(d->slot);
	free(d);
}

/* the slot of key (hash h): its own, or the empty one where it goes */
static dedup_slot_t *dedup_find(const dedup_t *d, const char *key, uint64_t h)
{
	size_t i = h & (d->cap - 1);

	while (d->slot[i].key && (d->slot[i].h != h || strcmp(d->slot[i].key, key)))
		i = (i + 1) & (d->cap - 1);
	return &d->slot[i];
}

/* twice the slots, every key moved; 0 or -1 */
static int dedup_grow(dedup_t *d)
{
	dedup_t big = { calloc(2 * d->cap, sizeof *d->slot), 2 * d->cap, d->n };

	if (!big.slot) return -1;
	for (size_t i = 0; i < d->cap; i++)
		if (d->slot[i].key) *dedup_find(&big, d->slot[i].key, d->slot[i].h) = d->slot[i];
	free(d->slot);
	*d = big;
	return 0;
}

int dedup_add(dedup_t *d, const char *seq, int rec)
{
	char *key = dedup_key(seq);
	uint64_t h;
	dedup_slot_t *s;

	if (!key || ((size_t)d->n + 1 > d->cap / 2 && dedup_grow(d) < 0)) {
		free(key);
		return -1;
	}
	h = hash_bytes(0, key, strlen(key));
	s = dedup_find(d, key, h);
	if (s->key) {
		free(key);
		return s->rec;
	}
	*s = (dedup_slot_t){ key, h, rec };
	d->n++;
	return rec;
}

int dedup_count(const dedup_t *d)
{
	return d->n;
}
