#!/usr/bin/env python3
"""mk_torch_fixtures.py - write the PyTorch checkpoint fixtures of tests/data (run once, by hand).

Needs torch and safetensors (pip install torch safetensors, in a virtual
environment outside the repository).  From tests/data/tiny_{a,b}/weights.safetensors
it writes, with torch.save (the zip format, the default since PyTorch 1.6):

  tiny_a/pytorch_model.bin       HF names, every tensor as in the safetensors file (fp32)
  tiny_a/pytorch_model_fp16.bin  HF names, the language model (esm.*) in fp16, the rest as is:
                                 the layout of facebook/esmfold_v1's pytorch_model.bin
  tiny_a/esmfold.pt              fair-esm's esmfold_3B_v1.pt layout: {"cfg": ..., "model": folding
                                 tensors (no esm.* keys)}
  tiny_a/esm2.pt                 fair-esm's esm2_t36_3B_UR50D.pt layout: {"args": ..., "model": the
                                 language model named encoder.sentence_encoder.layers.N...}, fp32
  tiny_b/pytorch_model_fp16.bin  as tiny_a's
  tiny_b/esmfold.pt, esm2.pt     fair-esm layout, the language model in fp16 and named
                                 layers.N... (no prefix)
  legacy.pt                      a small dict saved in the legacy (pre-1.6) format: to be refused
  hostile/*.pt                   the hostile catalogue, each to be refused with one error line:
                                 written by hand (a pickle assembler below, zipfile), no torch needed

The fair-esm names come from tests/data/manifest_esmfold_v1.json (its
"fair_esm_name" per tensor, after Hugging Face's convert_esm.py), not from
esmbatch's own table, so the test checks one against the other.
"""
import json
import os
import re
import struct
import sys
import zipfile
from collections import OrderedDict

import torch
from safetensors.torch import load_file

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")


def fair_names():
    """HF name pattern -> fair-esm name pattern (layer numbers as N)."""
    with open(os.path.join(DATA, "manifest_esmfold_v1.json")) as f:
        m = json.load(f)
    pat = {}
    for t in m["tensors"]:
        if t.get("fair_esm_name"):
            a = re.sub(r"\.\d+\.", ".N.", t["name"])
            b = re.sub(r"\.\d+\.", ".N.", t["fair_esm_name"])
            pat[a] = b
    # the contact head is not in the manifest's folding model; fair-esm names it so
    pat["esm.contact_head.regression.weight"] = "esm.contact_head.regression.weight"
    pat["esm.contact_head.regression.bias"] = "esm.contact_head.regression.bias"
    return pat


def to_fair(name, pat):
    nums = re.findall(r"\.(\d+)\.", name)
    key = re.sub(r"\.\d+\.", ".N.", name)
    if key not in pat:
        sys.exit("no fair-esm name for " + name)
    out = pat[key]
    for n in nums:   # the layer numbers back, in order
        out = out.replace(".N.", "." + n + ".", 1)
    return out


def save(obj, path, **kw):
    torch.save(obj, path, **kw)
    print(path, os.path.getsize(path))


# --- the hostile catalogue: pickles assembled opcode by opcode -------------

def u(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def glob(mod, name):
    return b"c" + mod.encode() + b"\n" + name.encode() + b"\n"


def i64(v):
    return b"\x8a\x08" + struct.pack("<q", v)


def tensor(key, cls, numel, offset, size, stride):
    """_rebuild_tensor_v2(persistent storage, offset, size, stride, False, OrderedDict())"""
    t = lambda xs: b"(" + b"".join(i64(x) for x in xs) + b"t"
    pid = b"(" + u("storage") + glob("torch", cls) + u(key) + u("cpu") + i64(numel) + b"tQ"
    return (glob("torch._utils", "_rebuild_tensor_v2") + b"(" + pid + i64(offset) + t(size) + t(stride) +
            b"\x89" + glob("collections", "OrderedDict") + b")R" + b"tR")


def state_dict(items):
    return b"\x80\x02" + glob("collections", "OrderedDict") + b")R(" + b"".join(u(k) + v for k, v in items) + b"u."


def write_zip(path, pkl, storages, compress=()):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
        for k, data in storages.items():
            z.writestr(zipfile.ZipInfo("archive/data/" + k), data,
                       zipfile.ZIP_DEFLATED if k in compress else zipfile.ZIP_STORED)
    print(path, os.path.getsize(path))


def hostile():
    d = os.path.join(DATA, "hostile")
    os.makedirs(d, exist_ok=True)
    four = struct.pack("<4f", 1, 2, 3, 4)
    good = state_dict([("w", tensor("0", "FloatStorage", 4, 0, [2, 2], [2, 1]))])
    write_zip(os.path.join(d, "good.pt"), good, {"0": four})
    with open(os.path.join(d, "good.pt"), "rb") as f:
        whole = f.read()
    with open(os.path.join(d, "truncated.pt"), "wb") as f:
        f.write(whole[: len(whole) * 2 // 3])
    write_zip(os.path.join(d, "offset_past.pt"),
              state_dict([("w", tensor("0", "FloatStorage", 4, 1000, [2, 2], [2, 1]))]), {"0": four})
    write_zip(os.path.join(d, "os_system.pt"),
              b"\x80\x02" + glob("os", "system") + b"(" + u("echo pwned") + b"tR.", {})
    write_zip(os.path.join(d, "other_class.pt"),
              b"\x80\x02" + glob("__main__", "Evil") + b")\x81" + b"}b.", {})
    write_zip(os.path.join(d, "huge_size.pt"),
              state_dict([("w", tensor("0", "FloatStorage", 1 << 62, 0, [1 << 31, 1 << 31], [1 << 31, 1]))]),
              {"0": four})
    n = 10000
    write_zip(os.path.join(d, "deep.pt"), b"\x80\x02}" + (u("a") + b"}") * n + b"s" * n + b".", {})
    write_zip(os.path.join(d, "bomb.pt"),
              state_dict([("w", tensor("0", "FloatStorage", 16 << 20, 0, [16 << 20], [1]))]),
              {"0": bytes(64 << 20)}, compress=("0",))


def main():
    hostile()
    pat = fair_names()
    for tiny, lm_half, lm_prefix in (("tiny_a", False, "encoder.sentence_encoder."), ("tiny_b", True, "")):
        d = os.path.join(DATA, tiny)
        sd = load_file(os.path.join(d, "weights.safetensors"))
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        names = sorted(sd)
        if tiny == "tiny_a":
            save(OrderedDict((k, sd[k]) for k in names), os.path.join(d, "pytorch_model.bin"))
        half = OrderedDict((k, sd[k].half() if k.startswith("esm.") else sd[k]) for k in names)
        save(half, os.path.join(d, "pytorch_model_fp16.bin"))
        fold = OrderedDict((to_fair(k, pat), sd[k]) for k in names if not k.startswith("esm."))
        # fair-esm's cfg: the folding model's settings (esmfold_config), as plain data
        save({"cfg": {"model": cfg["esmfold_config"]}, "model": fold}, os.path.join(d, "esmfold.pt"))
        lm = OrderedDict()
        for k in names:
            if not k.startswith("esm."):
                continue
            fk = to_fair(k, pat)[len("esm."):]
            t = sd[k].half() if lm_half and sd[k].is_floating_point() else sd[k]
            lm[lm_prefix + fk] = t
        # fair-esm's masked-language-model head: in the file, not used by ESMFold
        lm[lm_prefix.replace("sentence_encoder.", "") + "lm_head.bias"] = torch.zeros(cfg["vocab_size"])
        lm_cfg = {"model": {"encoder_layers": cfg["num_hidden_layers"], "encoder_embed_dim": cfg["hidden_size"],
                            "encoder_ffn_embed_dim": cfg["intermediate_size"],
                            "encoder_attention_heads": cfg["num_attention_heads"], "token_dropout": True}}
        save({"cfg": lm_cfg, "model": lm}, os.path.join(d, "esm2.pt"))
    save({"x": torch.arange(4, dtype=torch.float32)}, os.path.join(DATA, "legacy.pt"),
         _use_new_zipfile_serialization=False)


if __name__ == "__main__":
    main()
