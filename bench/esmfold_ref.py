#!/usr/bin/env python3
"""bench/esmfold_ref.py - the benchmark's Python side (never a build or test
dependency).

  esmfold_ref.py have-ref                     exit 0 when torch + transformers import
  esmfold_ref.py config FILE                  the benchmark model's config.json (no torch needed)
  esmfold_ref.py weights DIR [--seed N]       random-weights model of the benchmark's
                                              dimensions: DIR/weights.safetensors and
                                              DIR/config.json (the reference's own
                                              state_dict, so both engines share weights)
  esmfold_ref.py seqs FILE L... [--seed N]    one random sequence per length, FASTA
  esmfold_ref.py ref DIR FASTA NAME           fold record NAME with the public
                                              EsmForProteinFolding (float32, 2 threads);
                                              prints one JSON line: seconds, peak RSS,
                                              mean pLDDT
  esmfold_ref.py flops DIR L [PASSES]         model FLOPs of one fold (see count_flops)
"""
import json
import random
import resource
import sys
import time

AA = "ACDEFGHIKLMNPQRSTVWY"

# The benchmark model: ESM-2 6 x 320 (20 heads, ffn 1280), trunk 8 blocks,
# c_s 512, c_z 128, head widths 32, 4 passes; the published (esmfold_v1)
# structure-module and lDDT-head dimensions.
ESM = dict(hidden_size=320, num_hidden_layers=6, num_attention_heads=20, intermediate_size=1280)
TRUNK = dict(num_blocks=8, sequence_state_dim=512, pairwise_state_dim=128,
             sequence_head_width=32, pairwise_head_width=32, position_bins=32,
             max_recycles=4, chunk_size=None, dropout=0, layer_drop=0, cpu_grad_checkpoint=False)
SM = dict(sequence_dim=384, pairwise_dim=128, ipa_dim=16, resnet_dim=128, num_heads_ipa=12,
          num_qk_points=4, num_v_points=8, dropout_rate=0.1, num_blocks=8,
          num_transition_layers=1, num_resnet_blocks=2, num_angles=7, trans_scale_factor=10,
          epsilon=1e-8, inf=1e5)
VOCAB = ["<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T", "I", "D",
         "P", "K", "Q", "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U", "Z", "O", ".", "-",
         "<null_1>", "<mask>"]


def config_dict():
    """the benchmark model's config.json (Hugging Face EsmConfig layout)"""
    trunk = dict(TRUNK, structure_module=dict(SM))
    fold = dict(esm_type=None, fp16_esm=False, use_esm_attn_map=False, esm_ablate_pairwise=False,
                esm_ablate_sequence=False, esm_input_dropout=0, embed_aa=True, bypass_lm=False,
                lddt_head_hid_dim=128, trunk=trunk)
    return dict(vocab_size=33, pad_token_id=1, mask_token_id=32, max_position_embeddings=1026,
                position_embedding_type="rotary", token_dropout=True, layer_norm_eps=1e-5,
                emb_layer_norm_before=False, attention_probs_dropout_prob=0.0,
                hidden_dropout_prob=0.0, is_folding_model=True, esmfold_config=fold,
                vocab_list=VOCAB, architectures=["EsmForProteinFolding"], model_type="esm", **ESM)


def cmd_config(path):
    with open(path, "w") as f:
        json.dump(config_dict(), f, indent=2)


def cmd_weights(out, seed):
    import torch
    from safetensors.torch import save_file
    from transformers import EsmForProteinFolding
    from transformers import EsmConfig
    torch.manual_seed(seed)
    d = config_dict()
    del d["model_type"]
    model = EsmForProteinFolding(EsmConfig(**d)).float().eval()
    # the reference initialises several output layers to zero; perturb every
    # parameter so that every one of them matters, as the fixtures do
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    sd = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    save_file(sd, f"{out}/weights.safetensors")
    model.config.to_json_file(f"{out}/config.json")


def cmd_seqs(path, lengths, seed):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for L in lengths:
            f.write(f">len{L}\n{''.join(rng.choice(AA) for _ in range(L))}\n")


def read_fasta(path, name):
    seq, cur = [], None
    for line in open(path):
        if line.startswith(">"):
            cur = line[1:].split()[0]
        elif cur == name:
            seq.append(line.strip())
    return "".join(seq)


def cmd_ref(wdir, fasta, name):
    import torch
    from safetensors.torch import load_file
    from transformers import EsmConfig, EsmForProteinFolding
    torch.set_num_threads(2)
    cfg = EsmConfig.from_json_file(f"{wdir}/config.json")
    model = EsmForProteinFolding(cfg).float().eval()
    missing, unexpected = model.load_state_dict(load_file(f"{wdir}/weights.safetensors"), strict=False)
    if missing or unexpected:
        sys.exit(f"reference: weights do not match the model: {missing[:3]} {unexpected[:3]}")
    seq = read_fasta(fasta, name)
    with torch.no_grad():
        t0 = time.perf_counter()
        out = model.infer(seq)           # config max_recycles = 4 passes
        dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    mask = out["atom37_atom_exists"]
    plddt = float((out["plddt"] * mask).sum() / mask.sum())   # fair-esm's mean pLDDT
    print(json.dumps(dict(seconds=dt, peak_rss=rss, mean_plddt=100.0 * plddt)))


def count_flops(cfg, L, passes):
    """Model FLOPs of one fold of length L (2 per multiply-add; matrix
    products only: layer norms, softmax and elementwise work are not counted).

    ESM-2, once (T = L + 2, D wide, F ffn, n layers):
        n * (8 T D^2 + 4 T^2 D + 4 T D F)
    per trunk pass, per block (c_s, c_z, heads h_s = c_s / 32, h_z = c_z / 32):
        sequence attention   2 L^2 c_z h_s + 10 L c_s^2 + 4 L^2 c_s
        sequence MLP         16 L c_s^2
        sequence to pair     2 L c_s c_z + 2 L^2 c_z^2
        2 x tri. mult.       12 L^2 c_z^2 + 2 L^3 c_z        (each)
        2 x tri. attention   2 L^2 c_z h_z + 10 L^2 c_z^2 + 4 L^3 c_z   (each)
        pair MLP             16 L^2 c_z^2
    per pass, structure module input 2 L^2 c_z c_zsm, and per IPA block
    (H heads, c c_ipa, Pq / Pv points, c_zsm pair width)
        2 L^2 c_zsm H + 2 L^2 H (c + 3 Pq) + 2 L^2 H (c + 3 Pv + c_zsm)
    and, once, the distogram and pTM heads 2 x 2 L^2 c_z 64.  The
    sequence-only parts of the structure module and heads are O(L) and left out.
    """
    e, t = cfg["esm"], cfg["trunk"]
    sm = t["structure_module"]
    T, D, F, n = L + 2, e["hidden_size"], e["intermediate_size"], e["num_hidden_layers"]
    lm = n * (8 * T * D * D + 4 * T * T * D + 4 * T * D * F)
    cs, cz = t["sequence_state_dim"], t["pairwise_state_dim"]
    hs, hz = cs // t["sequence_head_width"], cz // t["pairwise_head_width"]
    blk = (2 * L * L * cz * hs + 10 * L * cs * cs + 4 * L * L * cs
           + 16 * L * cs * cs
           + 2 * L * cs * cz + 2 * L * L * cz * cz
           + 2 * (12 * L * L * cz * cz + 2 * L ** 3 * cz)
           + 2 * (2 * L * L * cz * hz + 10 * L * L * cz * cz + 4 * L ** 3 * cz)
           + 16 * L * L * cz * cz)
    H, c, czs = sm["num_heads_ipa"], sm["ipa_dim"], sm["pairwise_dim"]
    ipa = (2 * L * L * czs * H + 2 * L * L * H * (c + 3 * sm["num_qk_points"])
           + 2 * L * L * H * (c + 3 * sm["num_v_points"] + czs))
    per_pass = t["num_blocks"] * blk + 2 * L * L * cz * czs + sm["num_blocks"] * ipa
    return lm + passes * per_pass + 2 * 2 * L * L * cz * 64


def cmd_flops(wdir, L, passes):
    c = json.load(open(f"{wdir}/config.json"))
    cfg = dict(esm=c, trunk=c["esmfold_config"]["trunk"])
    print(count_flops(cfg, L, passes if passes else cfg["trunk"]["max_recycles"]))


def main(argv):
    seed = 9
    if "--seed" in argv:
        i = argv.index("--seed")
        seed = int(argv[i + 1])
        del argv[i:i + 2]
    if not argv:
        sys.exit(__doc__)
    cmd, args = argv[0], argv[1:]
    if cmd == "have-ref":
        try:
            import torch, transformers  # noqa: F401
        except Exception:
            sys.exit(1)
    elif cmd == "config" and len(args) == 1:
        cmd_config(args[0])
    elif cmd == "weights" and len(args) == 1:
        cmd_weights(args[0], seed)
    elif cmd == "seqs" and len(args) >= 2:
        cmd_seqs(args[0], [int(x) for x in args[1:]], seed)
    elif cmd == "ref" and len(args) == 3:
        cmd_ref(*args)
    elif cmd == "flops" and len(args) in (2, 3):
        cmd_flops(args[0], int(args[1]), int(args[2]) if len(args) == 3 else 0)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
