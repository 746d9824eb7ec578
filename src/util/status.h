/* status.h (prefix STATUS_) - what functions return: 0 on success, negative
 * on error, and by name the errors a caller acts on differently. */
#ifndef ESMBATCH_UTIL_STATUS_H
#define ESMBATCH_UTIL_STATUS_H

enum {
	STATUS_OK   = 0,
	STATUS_FAIL = -1,  /* an error, reported where it happened */
	STATUS_OOM  = -2,  /* memory refused (an arena, a device allocation): an
	                      event; the scheduler retries smaller */
	STATUS_PLAN = -3,  /* an executing pass outgrew its plan: a bug, the
	                      record fails and is never retried as if out of memory */
	STATUS_DEVICE = -4 /* the device is lost (CUDA: a sticky error, e.g. an
	                      illegal address or a launch failure, poisoned its
	                      context): the scheduler retires the device and gives
	                      its records to the others, never retries smaller */
};

#endif
