/* hparams.c - parse the Hugging Face ESMFold config.json (see hparams.h). */
#include "model/hparams.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "util/log.h"

/* the value at a dotted path below root, or NULL */
static json_t *hparams_at(json_t *v, const char *path)
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

/* integer (or boolean) at a dotted path, in lo..hi; -1 and one logged
 * error naming the key if absent or out of range (checked before the
 * conversion to int, so 2^31 does not wrap) */
static int hparams_int(json_t *root, const char *path, const char *what, long long lo, long long hi,
                       int *out)
{
	json_t *v = hparams_at(root, path);
	long long x;

	if (json_is_boolean(v)) x = json_is_true(v);
	else if (json_is_integer(v)) x = json_integer_value(v);
	else {
		log_error("%s: config key '%s' missing or not an integer", what, path);
		return -1;
	}
	if (x < lo || x > hi) {
		log_error("%s: config key '%s' is %lld, outside %lld..%lld", what, path, x, lo, hi);
		return -1;
	}
	*out = (int)x;
	return 0;
}

/* number at a dotted path, finite and in lo..hi (so it fits a float) */
static int hparams_real(json_t *root, const char *path, const char *what, double lo, double hi,
                        float *out)
{
	json_t *v = hparams_at(root, path);
	double x;

	if (!json_is_number(v)) {
		log_error("%s: config key '%s' missing or not a number", what, path);
		return -1;
	}
	x = json_number_value(v);
	if (!(x >= lo && x <= hi)) {
		log_error("%s: config key '%s' is %g, outside %g..%g", what, path, x, lo, hi);
		return -1;
	}
	*out = (float)x;
	return 0;
}

int hparams_parse(hparams_t *c, const char *text, const char *what)
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
	/* ranges: the published esmfold_v1 value (in brackets) well inside;
	 * the upper bounds keep products of two sizes below 2^31 and
	 * layer / block / recycle counts to what finishes */
#define I(path, field, lo, hi) rc |= hparams_int(root, path, what, lo, hi, &c->field)
#define R(path, field, lo, hi) rc |= hparams_real(root, path, what, lo, hi, &c->field)
#define T "esmfold_config.trunk."
#define SM "esmfold_config.trunk.structure_module."
	I("num_hidden_layers", lm_layers, 1, 256);               /* [36] */
	I("hidden_size", lm_dim, 1, 16384);                      /* [2560] */
	I("num_attention_heads", lm_heads, 1, 1024);             /* [40] */
	I("intermediate_size", lm_ffn, 1, 65536);                /* [10240] */
	I("vocab_size", vocab, 1, 64);                           /* [33] */
	R("layer_norm_eps", lm_ln_eps, 1e-12, 0.1);              /* [1e-5] */
	I("token_dropout", token_dropout, 0, 1);                 /* [true] */
	I("mask_token_id", mask_token, 0, 63);                   /* [32] */
	I("pad_token_id", pad_token, 0, 63);                     /* [1] */
	I(T "sequence_state_dim", c_s, 1, 8192);                 /* [1024] */
	I(T "pairwise_state_dim", c_z, 2, 2048);                 /* [128] */
	I(T "sequence_head_width", seq_head_width, 1, 8192);     /* [32] */
	I(T "pairwise_head_width", pair_head_width, 1, 2048);    /* [32] */
	I(T "num_blocks", trunk_blocks, 1, 512);                 /* [48] */
	I(T "position_bins", position_bins, 1, 4096);            /* [32] */
	I(T "max_recycles", max_recycles, 1, 64);                /* [4] */
	I("esmfold_config.lddt_head_hid_dim", lddt_hidden, 1, 8192); /* [128] */
	I(SM "sequence_dim", sm_c_s, 1, 8192);                   /* [384] */
	I(SM "pairwise_dim", sm_c_z, 1, 2048);                   /* [128] */
	I(SM "ipa_dim", sm_ipa_dim, 1, 1024);                    /* [16] */
	I(SM "resnet_dim", sm_resnet_dim, 1, 8192);              /* [128] */
	I(SM "num_heads_ipa", sm_heads, 1, 256);                 /* [12] */
	I(SM "num_qk_points", sm_qk_points, 1, 64);              /* [4] */
	I(SM "num_v_points", sm_v_points, 1, 64);                /* [8] */
	I(SM "num_blocks", sm_blocks, 1, 256);                   /* [8] */
	I(SM "num_transition_layers", sm_transitions, 0, 16);    /* [1] */
	I(SM "num_resnet_blocks", sm_resnet_blocks, 0, 16);      /* [2] */
	I(SM "num_angles", sm_angles, 7, 7);  /* [7]: the torsions geometry.c builds */
	R(SM "trans_scale_factor", sm_trans_scale, 1e-3, 1e4);   /* [10] */
	R(SM "epsilon", sm_eps, 1e-30, 1e-2);                    /* [1e-8] */
	R(SM "inf", sm_inf, 1.0, 1e30);                          /* [1e5] */
#undef T
#undef SM
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
	if (!rc && (c->mask_token >= c->vocab || c->pad_token >= c->vocab)) {
		log_error("%s: config key '%s' is not below vocab_size %d", what,
		          c->mask_token >= c->vocab ? "mask_token_id" : "pad_token_id", c->vocab);
		rc = -1;
	}
	if (!rc && (c->cls_token < 0 || c->eos_token < 0)) {
		log_error("%s: vocab_list lacks <cls> or <eos>", what);
		rc = -1;
	}
	/* sizes that must divide: the first that does not, by its key */
	if (!rc) {
		const char *bad = NULL;
		if (c->lm_dim % c->lm_heads || (c->lm_dim / c->lm_heads) % 2)
			bad = "hidden_size' / 'num_attention_heads (an even head width)";
		else if (c->c_s % c->seq_head_width)
			bad = "esmfold_config.trunk.sequence_state_dim' / 'sequence_head_width";
		else if (c->c_z % c->pair_head_width)
			bad = "esmfold_config.trunk.pairwise_state_dim' / 'pairwise_head_width";
		else if (c->c_z % 2)
			bad = "esmfold_config.trunk.pairwise_state_dim' / '2";
		if (bad) {
			log_error("%s: config keys '%s' do not divide", what, bad);
			rc = -1;
		}
	}
	json_decref(root);
	return rc ? -1 : 0;
}

int hparams_load(hparams_t *c, const char *path)
{
	json_error_t err;
	json_t *root = NULL;
	struct stat st;
	char *text;
	int rc, fd;

	/* O_NONBLOCK: a FIFO with no writer must not hang the open */
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0) {
		log_error("%s: cannot read config: %s", path, strerror(errno));
		if (fd >= 0) close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		log_error("%s: cannot read config: not a regular file", path);
		close(fd);
		return -1;
	}
	if (fcntl(fd, F_SETFL, 0) == 0) root = json_loadfd(fd, 0, &err);
	else snprintf(err.text, sizeof err.text, "%s", strerror(errno));
	close(fd);
	if (!root) {
		log_error("%s: cannot read config: %s", path, err.text);
		return -1;
	}
	text = json_dumps(root, 0);
	json_decref(root);
	if (!text) return -1;
	rc = hparams_parse(c, text, path);
	free(text);
	return rc;
}

/* facebook/esmfold_v1's config.json (its Hugging Face repository), the
 * fields esmbatch reads: the configuration of checkpoints that carry none */
static const char hparams_esmfold_v1[] =
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

const char *hparams_published_json(void) { return hparams_esmfold_v1; }
