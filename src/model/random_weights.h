/* random_weights.h (prefix random_weights_) - random weights for any model config, for tests and benchmarks.
 *
 * The tensor list is not a table of its own: the model's loaders are run
 * against a recorder (weights_open_record), so the file holds exactly the
 * tensors model_load asks for, with the shapes it asks for.  Values are
 * drawn from a fixed-seed generator per tensor (seeded by the seed and the
 * tensor's name, so one tensor does not depend on the others):
 *   2-D weights      N(0, 1 / fan_in), fan_in = shape[1]
 *   LayerNorm .weight  1
 *   .bias and other 1-D  N(0, 0.02^2)
 *   esm_s_combine    0 (an even mix of the LM layers)
 * The config text is stored as __metadata__["config"] (weights_open finds it
 * when no config.json lies beside the file) together with
 * __metadata__["esmbatch_random_seed"], labelling the weights as random.
 */
#ifndef ESMBATCH_MODEL_RANDOM_WEIGHTS_H
#define ESMBATCH_MODEL_RANDOM_WEIGHTS_H

#include <stdint.h>

#include "io/safetensors.h"

/* Write random weights for config.json text cfg_json (named `what` in
 * messages) to path, atomically, in dtype SAFETENSORS_F32, SAFETENSORS_F16 or SAFETENSORS_BF16.
 * Returns 0, or negative after one logged line. */
int random_weights_write(const char *cfg_json, const char *what, const char *path, uint64_t seed,
             safetensors_dtype_t dtype);

#endif
