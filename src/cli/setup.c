/* setup.c - the devices of a run, each with the model on it (see setup.h). */
#include "cli/setup.h"

#include <stdlib.h>

#include "util/log.h"
#include "backend/devices.h"

int setup_devs_open(const opt_t *o, weights_t *w, const quota_table_t *qt, int load, int64_t cpu_total,
                    sched_dev_t **devs, int *ndev)
{
	char **spec;
	int n = dev_split(o->devices, &spec);

	*ndev = 0;
	if (n < 0 || !(*devs = calloc(n, sizeof **devs))) {
		dev_split_free(spec, n);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		/* a card the binary cannot run is left out (one line); the run
		 * goes on with the others */
		if (dev_runnable(spec[i]) < 0) continue;
		sched_dev_t *d = &(*devs)[(*ndev)++];
		d->spec = spec[i];
		spec[i] = NULL;
		if (!(d->be = dev_open(d->spec, o->threads))) goto fail;
		if (dev_precision(d->be, o->precision) < 0) goto fail;
		/* --stream-lm where the device fetches (CUDA; the CPU's weights
		 * are in host memory already) */
		int lm_host = be_supports(d->be, BE_OP_FETCH) ? o->stream_lm : 0;
		if (o->stream_lm && !lm_host)
			log_info("device %s: --stream-lm does not apply (its weights are in host memory)", d->be->name);
		if (model_load(&d->model, w, load ? d->be : NULL, lm_host) < 0) goto fail;
		d->model.be = d->be;   /* shapes only: still planned for this device's ops */
		d->loaded = 1;
		d->workers = o->dump_tensors ? 1 : o->workers;
		/* its weights less the layers it fetches from host memory */
		d->budget = dev_budget(d->be, d->spec, cpu_total,
		                       weights_bytes(w, d->be) - esm2_host_bytes(&d->model.lm, d->be), load);
		if (d->model.lm.nhost)
			log_info("device %s: %d of the language model's %d layers in host memory (%.1f MB), "
			         "fetched as folds reach them", d->be->name, d->model.lm.nhost, d->model.lm.nlayers,
			         esm2_host_bytes(&d->model.lm, d->be) / 1e6);
		if (qt && quota_get(qt, "worker_overhead"))
			d->overhead = strtoll(quota_get(qt, "worker_overhead"), NULL, 10);
		if (d->workers > 0)
			log_info("device %s: budget %.2f GiB for %d worker(s)%s", d->be->name,
			         d->budget / 1073741824.0, d->workers, load ? "" : " (weights not loaded)");
		else
			log_info("device %s: budget %.2f GiB, workers auto%s", d->be->name,
			         d->budget / 1073741824.0, load ? "" : " (weights not loaded)");
	}
	if (*ndev == 0) {
		log_error("no device left to run on: every device given was refused");
		goto fail;
	}
	dev_split_free(spec, n);
	return 0;
fail:
	dev_split_free(spec, n);
	return -1;
}

void setup_devs_close(sched_dev_t *devs, int n)
{
	for (int i = 0; i < n; i++) {
		if (devs[i].loaded) model_free(&devs[i].model);
		be_free(devs[i].be);
		free(devs[i].spec);
	}
	free(devs);
}
