/* dev.c - the backend a device specification names (see dev.h). */
#include <stdio.h>
#include <string.h>

#include "be_cuda.h"
#include "dev.h"
#include "log.h"

int dev_precision(be_t *be, opt_prec_t prec)
{
	be_cuda_prec_t p = prec == OPT_PREC_FP32 ? BE_CUDA_FP32 :
	                   prec == OPT_PREC_FP16 ? BE_CUDA_FP16 : BE_CUDA_BF16;

	if (be_cuda_set_precision(be, p) < 0 && prec != OPT_PREC_AUTO && prec != OPT_PREC_FP32) {
		log_error("--precision %s: device %s computes in fp32 only (use fp32 or auto)",
		          opt_prec_name(prec), be->name);
		return -1;
	}
	log_info("device %s: GEMM inputs %s, fp32 accumulation; norms, softmax, attention and "
	         "structure geometry in fp32", be->name, be->precision);
	return 0;
}

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
