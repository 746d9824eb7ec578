/* setup.h (prefix setup_) - what fold, plan and calibrate share: the
 * devices a command line names, opened with the model on each. */
#ifndef ESMBATCH_CLI_SETUP_H
#define ESMBATCH_CLI_SETUP_H

#include "cli/options.h"
#include "sched/quota.h"
#include "sched/scheduler.h"

/* Open every device of o->devices into *devs (*ndev of them): backend,
 * --precision, the model loaded on it (load: 1) or its shapes only (0:
 * for planning; the budget then leaves room for the weights still to
 * come), workers, budget (dev_budget; cpu_total from dev_cpu_memory) and
 * the quota table's worker_overhead, logged.  0, or -1 after logging
 * (what was opened is in *devs: setup_devs_close it). */
int  setup_devs_open(const opt_t *o, weights_t *w, const quota_table_t *qt, int load, int64_t cpu_total,
                     sched_dev_t **devs, int *ndev);
void setup_devs_close(sched_dev_t *devs, int n);

#endif
