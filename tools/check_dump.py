#!/usr/bin/env python3
"""check_dump.py - compare `esmbatch --dump-tensors` output with a fixture.

usage: check_dump.py DUMP.safetensors FIXTURE_DIR [--require NAME,...]
       check_dump.py --tolerance FIXTURE_DIR SEQ TENSOR

For every tensor SEQ/TENSOR of FIXTURE_DIR/expected.safetensors whose
sequence SEQ is in the dump, the dump must hold the same tensor with the
same element count, within the golden tolerance (docs/testing.md, "The
golden tolerance"; this file is its Python side): max |dump - expected| <=
max(10 x expected.json's fp32_vs_fp64_max_abs_diff[TENSOR] for that
sequence, 1e-5), a NaN anywhere failing.  Batch members
(BATCH/INDEX/TENSOR) are skipped: esmbatch folds one sequence at a time.
Prints one line per tensor; exits 1 when any tensor fails or is missing.
--tolerance prints the tolerance of SEQ/TENSOR (exit 1 without a figure):
the shell tests' one way to it.  Python standard library only.
"""
import json
import math
import struct
import sys

DTYPES = {"F64": ("d", 8), "F32": ("f", 4), "I64": ("q", 8), "I32": ("i", 4)}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + hlen])
    data = blob[8 + hlen:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        code, size = DTYPES[e["dtype"]]
        b, en = e["data_offsets"]
        n = (en - b) // size
        out[name] = struct.unpack("<%d%s" % (n, code), data[b:en])
    return out


def read_json(path):
    with open(path) as f:
        text = f.read()
    # the fixtures' JSON carries bare Infinity (Python's json reads it)
    return json.loads(text)


TOL_FACTOR = 10.0   # the golden tolerance: 10 x the fp32-vs-fp64 figure,
TOL_FLOOR = 1e-5    # at least this


def tolerance(dev):
    """The golden tolerance of a tensor whose expected.json figure is dev
    (NaN for a NaN figure: nothing is within it)."""
    if math.isnan(dev):
        return math.nan
    return max(TOL_FACTOR * dev, TOL_FLOOR)


def max_abs_diff(got, want):
    """max |got - want|, NaN when either holds a NaN (0 when empty)."""
    worst = 0.0
    for a, b in zip(got, want):
        d = abs(a - b)
        if math.isnan(d):
            return math.nan
        worst = max(worst, d)
    return worst


def within(diff, tol):
    """The rule: diff <= tol, false when either is NaN."""
    return diff <= tol


def tolerance_main(argv):
    if len(argv) != 5:
        sys.stderr.write(__doc__)
        return 2
    meta = read_json(argv[2].rstrip("/") + "/expected.json")
    s = [x for x in meta["sequences"] if x["name"] == argv[3]]
    dev = s[0]["fp32_vs_fp64_max_abs_diff"].get(argv[4]) if s else None
    if dev is None:
        sys.stderr.write("check_dump.py: %s/%s: no figure in expected.json\n" % (argv[3], argv[4]))
        return 1
    print(tolerance(dev))
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--tolerance":
        return tolerance_main(argv)
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    dump = read_safetensors(argv[1])
    fixture = argv[2].rstrip("/")
    expected = read_safetensors(fixture + "/expected.safetensors")
    meta = read_json(fixture + "/expected.json")
    tol_of = {s["name"]: s["fp32_vs_fp64_max_abs_diff"] for s in meta["sequences"]}
    dumped = {k.split("/")[0] for k in dump}
    failed = checked = 0
    for key in sorted(expected):
        parts = key.split("/")
        if len(parts) != 2 or parts[0] not in dumped:
            continue
        seq, tensor = parts
        dev = tol_of.get(seq, {}).get(tensor)
        if dev is None:
            print("%-10s %-28s no tolerance in expected.json: skipped" % (seq, tensor))
            continue
        tol = tolerance(dev)
        want = expected[key]
        got = dump.get(key)
        checked += 1
        if got is None or len(got) != len(want):
            print("%-10s %-28s MISSING or wrong size" % (seq, tensor))
            failed += 1
            continue
        diff = max_abs_diff(got, want)
        ok = within(diff, tol)
        failed += not ok
        print("%-10s %-28s max diff %.3g  tol %.3g  ratio %.3f  %s"
              % (seq, tensor, diff, tol, diff / tol, "ok" if ok else "FAIL"))
    print("%d passed, %d failed" % (checked - failed, failed))
    return 1 if failed or not checked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
