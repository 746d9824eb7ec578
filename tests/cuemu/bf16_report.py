#!/usr/bin/env python3
"""bf16_report.py - what --precision bf16 costs against fp32, from two
`esmbatch --dump-tensors` files of the same records.

usage: bf16_report.py FP32.safetensors BF16.safetensors [LM_BOUND]

Prints, per tensor group, the largest |bf16 - fp32| and that deviation
relative to the group's largest |fp32|; then per record the mean pLDDT of
both, the largest |bf16 - fp32| of the per-atom pLDDT (0-1 scale), of the
PAE (A) and of the pTM, the C-alpha RMSD between the two structures
(same frame, no superposition) and the largest distance between an atom's
two positions (A).  Exits 1 when a tensor is missing or not finite,
2 when LM_BOUND is given and the language model's relative deviation exceeds it.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from check_dump import read_safetensors  # noqa: E402

GROUPS = [
    ("language model", ("esm_", "lm_logits")),
    ("trunk", ("trunk_", "s_s", "s_z", "recycle_bins")),
    ("structure module", ("sm_", "frames", "sidechain_frames", "positions", "angles",
                          "unnormalized_angles", "states", "atom37_positions")),
    ("heads", ("plddt", "ptm", "predicted_aligned_error", "max_predicted_aligned_error",
               "distogram_logits", "mean_plddt")),
]


def group_of(tensor):
    for name, prefixes in GROUPS:
        if any(tensor == p or tensor.startswith(p) for p in prefixes):
            return name
    return None


def maxdev(x, y):
    """largest |y - x| of two equal-length tensors; NaN if either is missing"""
    if x is None or y is None or len(x) != len(y):
        return float("nan")
    return max((abs(u - v) for u, v in zip(x, y)), default=0.0)


def main():
    a, b = read_safetensors(sys.argv[1]), read_safetensors(sys.argv[2])
    dev, ref, bad = {}, {}, 0
    for key, x in a.items():
        g = group_of(key.split("/", 1)[1])
        if g is None:
            continue
        y = b.get(key)
        if y is None or len(y) != len(x) or not all(math.isfinite(v) for v in y):
            print("%s: missing or not finite in the bf16 dump" % key)
            bad += 1
            continue
        dev[g] = max(dev.get(g, 0.0), max((abs(u - v) for u, v in zip(x, y)), default=0.0))
        ref[g] = max(ref.get(g, 0.0), max((abs(u) for u in x), default=0.0))
    lm = dev.get("language model", 0.0) / ref["language model"] if ref.get("language model") else 0.0
    print("%-18s %14s %14s" % ("group", "max |dev|", "relative"))
    for g, _ in GROUPS:
        if g in dev:
            print("%-18s %14.3g %14.3g" % (g, dev[g], dev[g] / ref[g] if ref[g] else 0.0))
    print("%-18s %10s %10s %11s %9s %9s %12s %13s" % ("record", "pLDDT fp32", "pLDDT bf16",
          "|dpLDDT|", "|dPAE|", "|dpTM|", "CA RMSD (A)", "max atom (A)"))
    for key in sorted(k for k in a if k.endswith("/atom37_positions")):
        rec = key.rsplit("/", 1)[0]
        x, y = a[key], b.get(key)
        if y is None:
            continue
        ca = [i for i in range(len(x) // 3) if i % 37 == 1]
        rmsd = math.sqrt(sum((x[3 * i + c] - y[3 * i + c]) ** 2 for i in ca for c in range(3)) / len(ca))
        worst = max(math.sqrt(sum((x[3 * i + c] - y[3 * i + c]) ** 2 for c in range(3)))
                    for i in range(len(x) // 3))
        pa, pb = a.get(rec + "/mean_plddt", [float("nan")]), b.get(rec + "/mean_plddt", [float("nan")])
        dev = [maxdev(a.get(rec + "/" + t), b.get(rec + "/" + t))
               for t in ("plddt", "predicted_aligned_error", "ptm")]
        print("%-18s %10.3f %10.3f %11.3g %9.3g %9.3g %12.3g %13.3g" % (rec, pa[0], pb[0], dev[0],
              dev[1], dev[2], rmsd, worst))
    if bad:
        return 1
    if len(sys.argv) > 3:
        bound = float(sys.argv[3])
        print("language model: relative deviation %.3g, bound %.3g: %s" % (lm, bound,
              "within" if lm <= bound else "OVER"))
        return 0 if lm <= bound else 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
