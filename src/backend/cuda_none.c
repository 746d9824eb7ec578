/* cuda_none.c - the CUDA backend of a build without CUDA: no device. */
#include <errno.h>

#include "util/log.h"
#include "backend/backend.h"
#include "backend/cuda.h"

be_t *be_cuda_init(int device)
{
	log_debug("cuda backend: this build has no CUDA support (device %d)", device);
	return NULL;
}

int be_cuda_count(void)
{
	return 0;
}

int be_cuda_set_precision(be_t *be, be_prec_t prec)
{
	return -EINVAL;
}

int be_cuda_seqtr_fits(const be_transition_t *t)
{
	(void)t;
	return 0;
}

int be_cuda_check_arch(int device)
{
	(void)device;
	return 0;
}
