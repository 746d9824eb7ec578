/* waitq.h (prefix wq_) - the scheduler's waiting items, for its rule "a
 * worker takes the longest waiting item whose quota fits" in O(log n).
 *
 * Items are named by their index (the scheduler's item array).  The queue
 * is a treap ordered by (quota, index), each node carrying the best item
 * of its subtree: the longest, the lowest index among equally long ones.
 * wq_pick(q, lim) is then what a scan of every waiting item in index order
 * keeping the first longest whose quota is <= lim would return, found in
 * one walk from the root.  Priorities are a hash of the index, so the
 * same calls always build the same tree.
 */
#ifndef ESMBATCH_SCHED_WAITQ_H
#define ESMBATCH_SCHED_WAITQ_H

#include <stdint.h>

typedef struct {
	int64_t  quota;
	int      len;
	int      l, r;     /* children, -1 none */
	int      best;     /* the subtree's longest item (lowest index on a tie) */
	uint32_t pri;
	int      in;       /* 1: queued */
} wq_node_t;

typedef struct {
	wq_node_t *n;      /* [cap]: one per item index */
	int        cap;
	int        root;   /* -1: empty */
	int        count;
} wq_t;

void    wq_init(wq_t *q);
void    wq_free(wq_t *q);
/* room for item indexes [0, cap); 0 or -1 (out of memory) */
int     wq_reserve(wq_t *q, int cap);
/* queue item i (below the reserved cap, not queued) with its quota and length */
void    wq_put(wq_t *q, int i, int64_t quota, int len);
/* unqueue item i (nothing when it is not queued) */
void    wq_take(wq_t *q, int i);
/* the longest queued item whose quota is <= lim (the lowest index among
 * equally long ones); -1 none */
int     wq_pick(const wq_t *q, int64_t lim);
/* the smallest quota queued; -1 when empty */
int64_t wq_least(const wq_t *q);

#endif
