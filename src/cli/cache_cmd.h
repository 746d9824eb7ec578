/* cache_cmd.h (prefix cache_cmd_) - `esmbatch cache stats|verify|prune -o
 * DIR`: the structure cache of fold --cache (io/struct_cache.h) looked at
 * from outside a run. */
#ifndef ESMBATCH_CLI_CACHE_CMD_H
#define ESMBATCH_CLI_CACHE_CMD_H

#include <stdio.h>

#include "cli/options.h"

/* stats: entries, bytes, temporaries, the oldest and newest use, on out;
 * verify: every entry read and checked, each corrupt one warned of;
 * prune: corrupt entries and dead writers' temporaries removed, then with
 * --cache-max the least recently used entries until the store fits.  The
 * cache is -o DIR (else --cache, ESMBATCH_CACHE).  Returns a process exit
 * code: EXIT_OK, EXIT_FATAL when the cache cannot be read or verify found
 * a corrupt entry. */
int cache_cmd_main(const opt_t *o, FILE *out);

#endif
