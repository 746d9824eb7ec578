/* be_cuda_none.c - the CUDA backend of a build without CUDA: no device. */
#include "be.h"
#include "log.h"

be_t *be_cuda_init(int device)
{
	log_debug("cuda backend: this build has no CUDA support (device %d)", device);
	return NULL;
}
