/* fuzz_quota.c - libFuzzer: the quota-table reader (sched/quota.c) on any
 * bytes: a table or a refusal naming the line, never a crash or a leak. */
#include <stdint.h>
#include <stdio.h>

#include "sched/quota.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	FILE *f;
	quota_table_t *t;

	if (!n || !(f = fmemopen((void *)data, n, "r"))) return 0;
	log_set_level(-1);
	t = quota_read_fp(f, "fuzz");
	fclose(f);
	if (t) {
		(void)quota_find(t, 1);
		(void)quota_find(t, 100000);
		(void)quota_get(t, "weights");
		quota_free(t);
	}
	return 0;
}
