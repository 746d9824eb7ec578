/* dev.c - the backend a device specification names (see dev.h). */
#include <stdio.h>
#include <string.h>

#include "dev.h"
#include "log.h"

be_t *dev_open(const char *spec, int threads)
{
	be_t *be = NULL;

	if (!spec || strcmp(spec, "cpu") != 0) {
		int dev = 0;
		if (spec && sscanf(spec, "cuda:%d", &dev) != 1 && strcmp(spec, "cuda") != 0) {
			log_error("--devices %s: expected cpu, cuda or cuda:N", spec);
			return NULL;
		}
		be = be_cuda_init(dev);
		if (!be && spec) {
			log_error("--devices %s: no such CUDA device", spec);
			return NULL;
		}
	}
	if (!be) be = be_cpu_init(threads);
	if (be) log_info("backend: %s", be->name);
	return be;
}
