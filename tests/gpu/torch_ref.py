#!/usr/bin/env python3
"""torch_ref.py - the PyTorch side of tests/gpu/check.sh (never a build or
test dependency).

usage: torch_ref.py [--fp16-esm] MODEL FASTA [DEVICE [CHUNK]]

Builds the public EsmForProteinFolding (Hugging Face transformers) with
random weights (its own initialisation) from MODEL, a config.json or a
manifest whose "config" is one (tests/data/manifest_esmfold_v1.json), on
DEVICE (default cuda): the language model in fp16 where the config says
fp16_esm or --fp16-esm is given, the rest in fp32.  The published
esmfold_v1 runs its language model in fp16 (EsmFoldConfig's default,
which its config.json keeps); the manifest's config says false (the
fixtures' setting, which the C tests read), so tests/gpu/check.sh passes
--fp16-esm to run the reference as published.  CHUNK > 0 sets the
trunk's chunk size (model.trunk.set_chunk_size: 64 is the low-memory
setting its users are told to use).  Folds every
record of FASTA with infer(): the config's max_recycles trunk passes, as
esmbatch runs by default.  Prints one JSON line per record: name, length,
chunk, seconds and, on CUDA, the torch.cuda.max_memory_reserved /
max_memory_allocated bytes of that fold (weights included) and
device_used, the whole process's device memory as the driver sees it
(total - free, the CUDA context included) right after the fold, the same
kind of figure as esmbatch's device_used_bytes; a record that fails (e.g.
out of memory) gets "error" instead.  Exit 0, 1 when torch, transformers
or the model cannot be had.
"""
import json
import sys
import time


def read_fasta(path):
    recs, name = [], None
    for line in open(path):
        line = line.strip()
        if line.startswith(">"):
            name = line[1:].split()[0]
            recs.append([name, ""])
        elif name is not None:
            recs[-1][1] += line
    return recs


def main(argv):
    fp16_esm = "--fp16-esm" in argv[1:2]
    if fp16_esm:
        argv = argv[:1] + argv[2:]
    if len(argv) not in (3, 4, 5):
        sys.exit(__doc__)
    dev = argv[3] if len(argv) >= 4 else "cuda"
    chunk = int(argv[4]) if len(argv) == 5 else 0
    try:
        import torch
        from transformers import EsmConfig, EsmForProteinFolding
    except Exception as e:  # noqa: BLE001 - any import failure means no reference
        sys.exit(f"torch_ref: no torch + transformers: {e}")
    cfg = json.load(open(argv[1]))
    if "config" in cfg and "tensors" in cfg:
        cfg = cfg["config"]
    cuda = dev.startswith("cuda")
    t0 = time.perf_counter()
    with torch.device(dev):
        model = EsmForProteinFolding(EsmConfig.from_dict(cfg)).eval()
    if (fp16_esm or model.config.esmfold_config.fp16_esm) and model.esm.dtype != torch.float16:
        model.esm.half()   # as from_pretrained leaves the published model
    if chunk > 0:
        model.trunk.set_chunk_size(chunk)
    if cuda:
        torch.cuda.synchronize()
    print(json.dumps(dict(name="(model built)", seconds=time.perf_counter() - t0)), flush=True)
    for name, seq in read_fasta(argv[2]):
        row = dict(name=name, length=len(seq), chunk=chunk)
        try:
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            with torch.no_grad():
                t0 = time.perf_counter()
                model.infer(seq)
                if cuda:
                    torch.cuda.synchronize()
                row["seconds"] = time.perf_counter() - t0
            if cuda:
                row["reserved"] = torch.cuda.max_memory_reserved()
                row["allocated"] = torch.cuda.max_memory_allocated()
                free, total = torch.cuda.mem_get_info()
                row["device_used"] = total - free
        except (RuntimeError, MemoryError) as e:   # torch.cuda.OutOfMemoryError included
            row["error"] = str(e).splitlines()[0][:200]
            if cuda:
                torch.cuda.empty_cache()
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
