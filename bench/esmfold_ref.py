#!/usr/bin/env python3
"""bench/esmfold_ref.py - the benchmark's Python side (never a build or test
dependency).

  esmfold_ref.py have-ref                     exit 0 when torch + transformers import
  esmfold_ref.py config FILE [--full]         the benchmark model's config.json (no torch needed)
  esmfold_ref.py weights DIR [--seed N] [--full]
                                              random-weights model of the benchmark's
                                              dimensions: DIR/weights.safetensors and
                                              DIR/config.json (the reference's own
                                              state_dict, so both engines share weights)
  esmfold_ref.py seqs FILE L... [--seed N]    one random sequence per length, FASTA
  esmfold_ref.py ref DIR FASTA NAME [PDB] [--threads N]
                                              fold record NAME with the public
                                              EsmForProteinFolding (float32); prints one
                                              JSON line: seconds of the fold, of loading,
                                              peak RSS, mean pLDDT, pTM; writes its PDB
  esmfold_ref.py flops DIR L [PASSES]         model FLOPs of one fold (see count_flops)
  esmfold_ref.py compare A.pdb B.pdb          largest distance between the same atom of
                                              two PDB files (Angstrom) and the largest
                                              B-factor (pLDDT) difference, one JSON line

--full is the esmfold_v1 shape (ESM-2 36 x 2560, 40 heads, ffn 10240; trunk
48 blocks, c_s 1024, c_z 128; the published structure module), 3.5e9
parameters: the reference is built with its parameters on the meta device
and filled tensor by tensor, and the weights file is written tensor by
tensor (the language model in fp16, as published; the rest fp32), so that
neither step holds more than the fp32 model (14 GB) at once.
"""
import json
import os
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
# The esmfold_v1 shape (bench/run --full): its published dimensions
FULL_ESM = dict(hidden_size=2560, num_hidden_layers=36, num_attention_heads=40,
                intermediate_size=10240)
FULL_TRUNK = dict(TRUNK, num_blocks=48, sequence_state_dim=1024)
VOCAB = ["<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T", "I", "D",
         "P", "K", "Q", "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U", "Z", "O", ".", "-",
         "<null_1>", "<mask>"]


def config_dict(full=False):
    """the benchmark model's config.json (Hugging Face EsmConfig layout)"""
    trunk = dict(FULL_TRUNK if full else TRUNK, structure_module=dict(SM))
    fold = dict(esm_type=None, fp16_esm=False, use_esm_attn_map=False, esm_ablate_pairwise=False,
                esm_ablate_sequence=False, esm_input_dropout=0, embed_aa=True, bypass_lm=False,
                lddt_head_hid_dim=128, trunk=trunk)
    return dict(vocab_size=33, pad_token_id=1, mask_token_id=32, max_position_embeddings=1026,
                position_embedding_type="rotary", token_dropout=True, layer_norm_eps=1e-5,
                emb_layer_norm_before=False, attention_probs_dropout_prob=0.0,
                hidden_dropout_prob=0.0, is_folding_model=True, esmfold_config=fold,
                vocab_list=VOCAB, architectures=["EsmForProteinFolding"], model_type="esm",
                **(FULL_ESM if full else ESM))


def cmd_config(path, full=False):
    with open(path, "w") as f:
        json.dump(config_dict(full), f, indent=2)


def cmd_weights(out, seed, full=False):
    if full:
        return cmd_weights_full(out, seed)
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


def lm_on_meta():
    """a context in which EsmModel (the language model) is built with its
    parameters on the meta device (its buffers real): nothing allocated,
    nothing initialised; the rest of the model is built as usual"""
    import contextlib
    import torch
    from transformers.models.esm import modeling_esm

    @contextlib.contextmanager
    def ctx(everything=False):
        orig_reg, orig_init = torch.nn.Module.register_parameter, modeling_esm.EsmModel.__init__
        depth = [1 if everything else 0]

        def reg(self, name, p):
            if p is not None and depth[0]:
                p = torch.nn.Parameter(p.to("meta"), requires_grad=p.requires_grad)
            orig_reg(self, name, p)

        def init(self, *a, **k):
            depth[0] += 1
            try:
                orig_init(self, *a, **k)
            finally:
                depth[0] -= 1
        torch.nn.Module.register_parameter = reg
        modeling_esm.EsmModel.__init__ = init
        try:
            yield
        finally:
            torch.nn.Module.register_parameter = orig_reg
            modeling_esm.EsmModel.__init__ = orig_init
    return ctx


def set_tensor(model, name, t):
    """put tensor t in model's parameter or buffer NAME (its meta placeholder)"""
    import torch
    path, _, leaf = name.rpartition(".")
    mod = model.get_submodule(path)
    if leaf in mod._parameters:
        mod._parameters[leaf] = torch.nn.Parameter(t, requires_grad=False)
    elif leaf in mod._buffers:
        mod._buffers[leaf] = t.to(mod._buffers[leaf].dtype)
    else:
        sys.exit(f"reference: weights hold {name}, the model has no such tensor")


def write_safetensors(path, entries):
    """write a safetensors file tensor by tensor: entries is a list of
    (name, dtype, shape, make) where make() returns the tensor (of that
    dtype and shape); only one tensor is held at a time"""
    import torch
    names = {torch.float16: "F16", torch.float32: "F32", torch.int64: "I64", torch.int32: "I32",
             torch.bfloat16: "BF16", torch.bool: "BOOL", torch.float64: "F64"}
    hdr, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dt, shape, _ in entries:
        n = dt.itemsize
        for s in shape:
            n *= s
        hdr[name] = dict(dtype=names[dt], shape=list(shape), data_offsets=[off, off + n])
        off += n
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".part", "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for name, dt, shape, make in entries:
            t = make().contiguous()
            if t.dtype != dt or tuple(t.shape) != tuple(shape):
                sys.exit(f"weights: {name} made {t.dtype} {tuple(t.shape)}, not {dt} {tuple(shape)}")
            f.write(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    os.replace(path + ".part", path)


def cmd_weights_full(out, seed):
    """the esmfold_v1-shaped model: the trunk, structure module and heads
    initialised by the reference itself, the language model (built on the
    meta device) drawn as the reference's initialisation draws it (normal,
    std = initializer_range; layer norms one and zero), then every
    parameter perturbed by 0.02 randn as in the small model; written
    tensor by tensor, the language model in fp16"""
    import torch
    from transformers import EsmConfig, EsmForProteinFolding
    torch.manual_seed(seed)
    d = config_dict(full=True)
    del d["model_type"]
    cfg = EsmConfig(**d)
    with lm_on_meta()():
        model = EsmForProteinFolding(cfg).eval()
    g = torch.Generator().manual_seed(seed + 1)
    mods = dict(model.named_modules())
    sd = model.state_dict(keep_vars=True)
    params = {id(p) for p in model.parameters()}

    def maker(name, t):
        def make():
            with torch.no_grad():
                if id(t) not in params:                      # a buffer: the model's own value
                    return t.detach().clone()
                if t.device.type == "meta":                  # the language model's
                    mod = mods[name.rpartition(".")[0]]
                    if isinstance(mod, torch.nn.LayerNorm):
                        v = torch.ones(t.shape) if name.endswith("weight") else torch.zeros(t.shape)
                    elif name.endswith("bias"):
                        v = torch.zeros(t.shape)
                    else:
                        v = cfg.initializer_range * torch.randn(t.shape, generator=g)
                else:
                    v = t.detach().float().clone()
                v.add_(0.02 * torch.randn(t.shape, generator=g))
                return v.half() if name.startswith("esm.") else v
        return make

    entries = []
    for name, t in sd.items():
        dt = t.dtype if id(t) not in params else (torch.float16 if name.startswith("esm.") else torch.float32)
        entries.append((name, dt, tuple(t.shape), maker(name, t)))
    os.makedirs(out, exist_ok=True)
    write_safetensors(f"{out}/weights.safetensors", entries)
    cmd_config(f"{out}/config.json", full=True)


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


def load_ref(wdir):
    """the reference built from DIR/config.json with its parameters on the
    meta device, then filled tensor by tensor from DIR/weights.safetensors,
    widened to float32: it never holds more than the fp32 model"""
    import torch
    from safetensors import safe_open
    from transformers import EsmConfig, EsmForProteinFolding
    cfg = EsmConfig.from_json_file(f"{wdir}/config.json")
    with lm_on_meta()(everything=True):
        model = EsmForProteinFolding(cfg).eval()
    with safe_open(f"{wdir}/weights.safetensors", framework="pt") as f:
        for k in f.keys():
            t = f.get_tensor(k)
            set_tensor(model, k, t.float() if t.is_floating_point() else t)
    left = [n for n, p in model.named_parameters() if p.device.type == "meta"]
    if left:
        sys.exit(f"reference: weights lack {len(left)} tensors of the model: {left[:3]}")
    return model


def cmd_ref(wdir, fasta, name, pdb=None, threads=2):
    import torch
    t0 = time.perf_counter()
    torch.set_num_threads(threads)
    model = load_ref(wdir)
    seq = read_fasta(fasta, name)
    with torch.no_grad():
        t1 = time.perf_counter()
        out = model.infer(seq)           # config max_recycles = 4 passes
        dt = time.perf_counter() - t1
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    # the mean over residues of the CA's pLDDT, as esmbatch's summary.tsv
    # reports it (fair-esm's own mean runs over every atom: another number)
    plddt = float(out["plddt"][..., 1].mean())
    if pdb:   # its per-atom pLDDT as fair-esm and esmbatch write it, 0-100
        with open(pdb, "w") as f:
            f.write(model.output_to_pdb(dict(out, plddt=100.0 * out["plddt"]))[0])
    print(json.dumps(dict(seconds=dt, load_seconds=t1 - t0, peak_rss=rss,
                          mean_plddt=100.0 * plddt, ptm=float(out["ptm"]))))


def pdb_atoms(path):
    """(chain, residue number, atom name) -> ((x, y, z), B-factor) of a PDB's ATOM records"""
    atoms = {}
    for line in open(path):
        if line.startswith("ATOM"):
            key = (line[21], int(line[22:26]), line[12:16].strip())
            atoms[key] = ((float(line[30:38]), float(line[38:46]), float(line[46:54])),
                          float(line[60:66]))
    return atoms


def compare_pdb(a, b):
    """largest distance between the same atom in PDB files a and b, and the
    largest B-factor difference; None for both when their atoms differ"""
    pa, pb = pdb_atoms(a), pdb_atoms(b)
    if not pa or pa.keys() != pb.keys():
        return dict(max_dev=None, max_dplddt=None, atoms=len(pa), atoms_other=len(pb))
    dev = max(sum((u - v) ** 2 for u, v in zip(pa[k][0], pb[k][0])) ** 0.5 for k in pa)
    db = max(abs(pa[k][1] - pb[k][1]) for k in pa)
    return dict(max_dev=dev, max_dplddt=db, atoms=len(pa), atoms_other=len(pb))


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
    seed, threads, full = 9, 2, "--full" in argv
    if full:
        argv.remove("--full")
    if "--seed" in argv:
        i = argv.index("--seed")
        seed = int(argv[i + 1])
        del argv[i:i + 2]
    if "--threads" in argv:
        i = argv.index("--threads")
        threads = int(argv[i + 1])
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
        cmd_config(args[0], full)
    elif cmd == "weights" and len(args) == 1:
        cmd_weights(args[0], seed, full)
    elif cmd == "seqs" and len(args) >= 2:
        cmd_seqs(args[0], [int(x) for x in args[1:]], seed)
    elif cmd == "ref" and len(args) in (3, 4):
        cmd_ref(*args, threads=threads)
    elif cmd == "compare" and len(args) == 2:
        print(json.dumps(compare_pdb(*args)))
    elif cmd == "flops" and len(args) in (2, 3):
        cmd_flops(args[0], int(args[1]), int(args[2]) if len(args) == 3 else 0)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
