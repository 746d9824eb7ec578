/* cache_cmd.c - `esmbatch cache stats|verify|prune -o DIR` (cache_cmd.h). */
#include "cli/cache_cmd.h"

#include <string.h>
#include <time.h>

#include "util/log.h"
#include "io/struct_cache.h"

/* t as UTC, or "-" for none */
static void cache_cmd_time(time_t t, char *buf, size_t cap)
{
	struct tm tm;

	if (!t || !gmtime_r(&t, &tm) || !strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, cap, "-");
}

int cache_cmd_main(const opt_t *o, FILE *out)
{
	const char *dir = o->outdir ? o->outdir : o->cache, *a = o->cache_action;
	int verify = strcmp(a, "stats") != 0, prune = !strcmp(a, "prune");
	cache_stats_t st;
	char old[32], young[32];

	if (cache_scan(dir, verify, prune, &st) < 0) return EXIT_FATAL;
	if (prune && o->cache_max > 0) {
		int64_t left = cache_evict(dir, o->cache_max);
		if (left < 0 || cache_scan(dir, 0, 0, &st) < 0) return EXIT_FATAL;
	}
	cache_cmd_time(st.oldest, old, sizeof old);
	cache_cmd_time(st.newest, young, sizeof young);
	fprintf(out, "cache\t%s\nentries\t%ld\nbytes\t%lld\ntemporaries\t%ld\ntemporary_bytes\t%lld\n"
	        "least_recently_used\t%s\nmost_recently_used\t%s\n", dir, st.entries,
	        (long long)st.bytes, st.tmp, (long long)st.tmp_bytes, old, young);
	if (verify) fprintf(out, "corrupt\t%ld\n", st.bad);
	if (prune) fprintf(out, "removed\t%ld\n", st.removed);
	if (verify && !prune && st.bad) {
		log_error("cache %s: %ld corrupt entr%s (never served; `esmbatch cache prune -o %s` "
		          "removes them)", dir, st.bad, st.bad == 1 ? "y" : "ies", dir);
		return EXIT_FATAL;
	}
	return EXIT_OK;
}
