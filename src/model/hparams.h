/* hparams.h (prefix hparams_) - model hyper-parameters, from a Hugging Face ESMFold config.json.
 *
 * Every size the engine uses comes from here, so the tiny test models and
 * the published esmfold_v1 run the same code.  Field comments give the
 * config.json key (esmfold_config.trunk... abbreviated as trunk.).
 */
#ifndef ESMBATCH_MODEL_HPARAMS_H
#define ESMBATCH_MODEL_HPARAMS_H

typedef struct {
	/* ESM-2 language model */
	int   lm_layers;        /* num_hidden_layers */
	int   lm_dim;           /* hidden_size */
	int   lm_heads;         /* num_attention_heads */
	int   lm_ffn;           /* intermediate_size */
	int   vocab;            /* vocab_size */
	float lm_ln_eps;        /* layer_norm_eps */
	int   token_dropout;    /* token_dropout */
	int   mask_token;       /* mask_token_id */
	int   pad_token;        /* pad_token_id */
	int   cls_token;        /* index of "<cls>" in vocab_list */
	int   eos_token;        /* index of "<eos>" in vocab_list */
	char  vocab_list[64][12]; /* vocab_list */

	/* folding trunk */
	int   c_s;              /* trunk.sequence_state_dim */
	int   c_z;              /* trunk.pairwise_state_dim */
	int   seq_head_width;   /* trunk.sequence_head_width */
	int   pair_head_width;  /* trunk.pairwise_head_width */
	int   trunk_blocks;     /* trunk.num_blocks */
	int   position_bins;    /* trunk.position_bins */
	int   max_recycles;     /* trunk.max_recycles (number of trunk passes) */
	int   lddt_hidden;      /* lddt_head_hid_dim */

	/* structure module */
	int   sm_c_s;           /* trunk.structure_module.sequence_dim */
	int   sm_c_z;           /* trunk.structure_module.pairwise_dim */
	int   sm_ipa_dim;       /* trunk.structure_module.ipa_dim */
	int   sm_resnet_dim;    /* trunk.structure_module.resnet_dim */
	int   sm_heads;         /* trunk.structure_module.num_heads_ipa */
	int   sm_qk_points;     /* trunk.structure_module.num_qk_points */
	int   sm_v_points;      /* trunk.structure_module.num_v_points */
	int   sm_blocks;        /* trunk.structure_module.num_blocks */
	int   sm_transitions;   /* trunk.structure_module.num_transition_layers */
	int   sm_resnet_blocks; /* trunk.structure_module.num_resnet_blocks */
	int   sm_angles;        /* trunk.structure_module.num_angles */
	float sm_trans_scale;   /* trunk.structure_module.trans_scale_factor */
	float sm_eps;           /* trunk.structure_module.epsilon */
	float sm_inf;           /* trunk.structure_module.inf */
} hparams_t;

/* Parse config.json text / file.  0, or negative with one logged line naming
 * the file and the key; hparams_load refuses a path that is not a regular file
 * (a FIFO, a device) without waiting on it. */
int hparams_parse(hparams_t *c, const char *json_text, const char *what);
int hparams_load(hparams_t *c, const char *path);

/* The published facebook/esmfold_v1 config.json (the fields read here), for
 * checkpoints that carry no configuration of their own (static text). */
const char *hparams_published_json(void);

#endif
