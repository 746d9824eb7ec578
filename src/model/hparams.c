/* hparams.c - parse the Hugging Face ESMFold config.json (see hparams.h). */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "model/hparams.h"
#include "util/log.h"

/* the value at a dotted path below root, or NULL */
static json_t *cfg_at(json_t *v, const char *path)
{
	char key[128];

	while (v && *path) {
		size_t n = strcspn(path, ".");
		if (n >= sizeof key) return NULL;
		memcpy(key, path, n);
		key[n] = 0;
		v = json_object_get(v, key);
		path += n + (path[n] == '.');
	}
	return v;
}

/* integer (or boolean) at a dotted path; -1 and a logged error if absent */
static int cfg_int(json_t *root, const char *path, const char *what, int *out)
{
	json_t *v = cfg_at(root, path);

	if (json_is_boolean(v)) { *out = json_is_true(v); return 0; }
	if (!json_is_integer(v)) {
		log_error("%s: config key '%s' missing or not an integer", what, path);
		return -1;
	}
	*out = (int)json_integer_value(v);
	return 0;
}

static int cfg_real(json_t *root, const char *path, const char *what, float *out)
{
	json_t *v = cfg_at(root, path);

	if (!json_is_number(v)) {
		log_error("%s: config key '%s' missing or not a number", what, path);
		return -1;
	}
	*out = (float)json_number_value(v);
	return 0;
}

int cfg_parse(cfg_t *c, const char *text, const char *what)
{
	json_error_t err;
	json_t *root = json_loads(text, 0, &err), *vl;
	int rc = 0;

	memset(c, 0, sizeof *c);
	if (!root || !json_is_object(root)) {
		log_error("%s: malformed config JSON: %s (line %d)", what, root ? "not an object" : err.text, err.line);
		json_decref(root);
		return -1;
	}
#define I(path, field) rc |= cfg_int(root, path, what, &c->field)
#define R(path, field) rc |= cfg_real(root, path, what, &c->field)
	I("num_hidden_layers", lm_layers);
	I("hidden_size", lm_dim);
	I("num_attention_heads", lm_heads);
	I("intermediate_size", lm_ffn);
	I("vocab_size", vocab);
	R("layer_norm_eps", lm_ln_eps);
	I("token_dropout", token_dropout);
	I("mask_token_id", mask_token);
	I("pad_token_id", pad_token);
	I("esmfold_config.trunk.sequence_state_dim", c_s);
	I("esmfold_config.trunk.pairwise_state_dim", c_z);
	I("esmfold_config.trunk.sequence_head_width", seq_head_width);
	I("esmfold_config.trunk.pairwise_head_width", pair_head_width);
	I("esmfold_config.trunk.num_blocks", trunk_blocks);
	I("esmfold_config.trunk.position_bins", position_bins);
	I("esmfold_config.trunk.max_recycles", max_recycles);
	I("esmfold_config.lddt_head_hid_dim", lddt_hidden);
	I("esmfold_config.trunk.structure_module.sequence_dim", sm_c_s);
	I("esmfold_config.trunk.structure_module.pairwise_dim", sm_c_z);
	I("esmfold_config.trunk.structure_module.ipa_dim", sm_ipa_dim);
	I("esmfold_config.trunk.structure_module.resnet_dim", sm_resnet_dim);
	I("esmfold_config.trunk.structure_module.num_heads_ipa", sm_heads);
	I("esmfold_config.trunk.structure_module.num_qk_points", sm_qk_points);
	I("esmfold_config.trunk.structure_module.num_v_points", sm_v_points);
	I("esmfold_config.trunk.structure_module.num_blocks", sm_blocks);
	I("esmfold_config.trunk.structure_module.num_transition_layers", sm_transitions);
	I("esmfold_config.trunk.structure_module.num_resnet_blocks", sm_resnet_blocks);
	I("esmfold_config.trunk.structure_module.num_angles", sm_angles);
	R("esmfold_config.trunk.structure_module.trans_scale_factor", sm_trans_scale);
	R("esmfold_config.trunk.structure_module.epsilon", sm_eps);
	R("esmfold_config.trunk.structure_module.inf", sm_inf);
#undef I
#undef R
	vl = json_object_get(root, "vocab_list");
	c->cls_token = c->eos_token = -1;
	if (!rc && json_is_array(vl) && json_array_size(vl) == (size_t)c->vocab && c->vocab <= 64) {
		for (int i = 0; i < c->vocab; i++) {
			const char *s = json_string_value(json_array_get(vl, i));
			if (!s || strlen(s) >= sizeof c->vocab_list[i]) { rc = -1; break; }
			strcpy(c->vocab_list[i], s);
			if (!strcmp(s, "<cls>")) c->cls_token = i;
			if (!strcmp(s, "<eos>")) c->eos_token = i;
		}
	} else if (!rc) {
		log_error("%s: config key 'vocab_list' missing or not %d strings", what, c->vocab);
		rc = -1;
	}
	if (!rc && (c->cls_token < 0 || c->eos_token < 0)) {
		log_error("%s: vocab_list lacks <cls> or <eos>", what);
		rc = -1;
	}
	if (!rc && (c->lm_dim % c->lm_heads || c->c_s % c->seq_head_width ||
	            c->c_z % c->pair_head_width || c->c_z % 2)) {
		log_error("%s: inconsistent sizes (hidden_size / heads, state dims / head widths)", what);
		rc = -1;
	}
	json_decref(root);
	return rc ? -1 : 0;
}

int cfg_load(cfg_t *c, const char *path)
{
	json_error_t err;
	json_t *root = json_load_file(path, 0, &err);
	char *text;
	int rc;

	if (!root) {
		log_error("%s: cannot read config: %s", path, err.text);
		return -1;
	}
	text = json_dumps(root, 0);
	json_decref(root);
	if (!text) return -1;
	rc = cfg_parse(c, text, path);
	free(text);
	return rc;
}

/* facebook/esmfold_v1's config.json (its Hugging Face repository), the
 * fields esmbatch reads: the configuration of checkpoints that carry none */
static const char cfg_esmfold_v1[] =
	"{\"architectures\":[\"EsmForProteinFolding\"],\"model_type\":\"esm\",\"vocab_size\":33,\"hidden_size\""
	":2560,\"num_hidden_layers\":36,\"num_attention_heads\":40,\"intermediate_size\":10240,\"layer_nor"
	"m_eps\":1e-05,\"position_embedding_type\":\"rotary\",\"emb_layer_norm_before\":false,\"token_dropo"
	"ut\":true,\"mask_token_id\":32,\"pad_token_id\":1,\"max_position_embeddings\":1026,\"is_folding_mo"
	"del\":true,\"esmfold_config\":{\"esm_type\":\"esm2_3B\",\"fp16_esm\":false,\"use_esm_attn_map\":false"
	",\"esm_ablate_pairwise\":false,\"esm_ablate_sequence\":false,\"esm_input_dropout\":0,\"embed_aa\":"
	"true,\"bypass_lm\":false,\"lddt_head_hid_dim\":128,\"trunk\":{\"num_blocks\":48,\"sequence_state_di"
	"m\":1024,\"pairwise_state_dim\":128,\"sequence_head_width\":32,\"pairwise_head_width\":32,\"positi"
	"on_bins\":32,\"dropout\":0,\"layer_drop\":0,\"cpu_grad_checkpoint\":false,\"max_recycles\":4,\"chunk"
	"_size\":null,\"structure_module\":{\"sequence_dim\":384,\"pairwise_dim\":128,\"ipa_dim\":16,\"resnet"
	"_dim\":128,\"num_heads_ipa\":12,\"num_qk_points\":4,\"num_v_points\":8,\"dropout_rate\":0.1,\"num_bl"
	"ocks\":8,\"num_transition_layers\":1,\"num_resnet_blocks\":2,\"num_angles\":7,\"trans_scale_factor"
	"\":10,\"epsilon\":1e-08,\"inf\":100000.0}}},\"vocab_list\":[\"<cls>\",\"<pad>\",\"<eos>\",\"<unk>\",\"L\",\""
	"A\",\"G\",\"V\",\"S\",\"E\",\"R\",\"T\",\"I\",\"D\",\"P\",\"K\",\"Q\",\"N\",\"F\",\"Y\",\"M\",\"H\",\"W\",\"C\",\"X\",\"B\",\"U\",\"Z\""
	",\"O\",\".\",\"-\",\"<null_1>\",\"<mask>\"]}";

const char *cfg_published_json(void) { return cfg_esmfold_v1; }
