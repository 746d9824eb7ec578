#!/usr/bin/env python3
"""check_pdb.py - read back PDB files written by esmbatch.

usage: check_pdb.py OURS.pdb [EXPECTED.pdb TOL]

1. gemmi (an independent parser) reads OURS.pdb: it must succeed, hold at
   least one model, and its atom count and per-chain residue numbering must
   equal those of the ATOM records (numbers strictly increasing per chain).
2. With EXPECTED.pdb (a fixture's expected_NAME.esm.pdb) and TOL (Angstrom,
   the fixture's atom37_positions tolerance): every ATOM/TER record of OURS
   equals the expected one in every column except the coordinates, which
   must agree within TOL plus the two roundings to 3 printed decimals
   (0.001), and the B-factor, which must agree within 0.01 (its last
   printed digit may round the other way); a NaN is within nothing
   (docs/testing.md, "The golden tolerance").  A TER record of ours is the
   full 80 columns and names its chain's last residue; the reference's
   names the model's, which for every chain of a multimer but the last is
   the 25th glycine of the linker after it (its number the chain's last
   plus 25, as --keep-linker-numbering numbers it): there ours must name
   the residue 25 before, the last of its SEQRES.
Exit 0 when all holds; otherwise prints the first difference and exits 1.
"""
import sys

import gemmi


def records(path):
    with open(path) as f:
        return [l.rstrip("\n") for l in f if l.startswith(("ATOM", "TER"))]


def fail(msg):
    print("check_pdb: " + msg)
    sys.exit(1)


def read_back(path):
    st = gemmi.read_structure(path)
    if len(st) < 1:
        fail("%s: gemmi found no model" % path)
    atoms = [l for l in records(path) if l.startswith("ATOM")]
    n = sum(len(r) for ch in st[0] for r in ch)
    if n != len(atoms):
        fail("%s: gemmi reads %d atoms, the file has %d ATOM records" % (path, n, len(atoms)))
    for ch in st[0]:
        nums = [r.seqid.num for r in ch]
        if any(b <= a for a, b in zip(nums, nums[1:])):
            fail("%s: chain %s residue numbers not increasing" % (path, ch.name))
        want = sorted({int(l[22:26]) for l in atoms if l[21] == ch.name})
        if nums != want:
            fail("%s: chain %s residue numbers differ from the ATOM records" % (path, ch.name))


LINKER = 25


def seqres_last(path):
    """chain -> the last residue name of its SEQRES records"""
    last = {}
    with open(path) as f:
        for l in f:
            if l.startswith("SEQRES"):
                last[l[11]] = l[19:].split()[-1]
    return last


def ter_of(ours, x, y, last, linker_after):
    """ours' TER x and the expected one, from the reference's y"""
    if len(x) != 80:
        fail("%s: a TER record of %d columns, not 80\n  ours: %s" % (ours, len(x), x))
    if linker_after:
        y = "%s%3s %s%4d" % (y[:17], last.get(y[21], "?"), y[21], int(y[22:26]) - LINKER)
    return x.rstrip(), y


def compare(ours, expected, tol):
    a, b = records(ours), records(expected)
    last = seqres_last(ours)
    if len(a) != len(b):
        fail("%s: %d ATOM/TER records, expected %d" % (ours, len(a), len(b)))
    for k, (x, y) in enumerate(zip(a, b)):
        if x.startswith("TER"):
            x, y = ter_of(ours, x, y, last, k + 1 < len(a))
        if x[:30] != y[:30] or x[54:60] != y[54:60] or x[66:] != y[66:]:
            fail("%s: record differs\n  ours:     %s\n  expected: %s" % (ours, x, y))
        if x.startswith("ATOM"):
            for k in range(3):
                c0, c1 = float(x[30 + 8 * k:38 + 8 * k]), float(y[30 + 8 * k:38 + 8 * k])
                # both files print 3 decimals, each rounding by up to
                # 0.0005: |p0 - p1| <= 0.0005 + |x0 - x1| + 0.0005
                if not abs(c0 - c1) <= tol + 0.001 + 1e-9:   # NaN fails
                    fail("%s: coordinate off by %.4f > %.4g\n  ours:     %s\n  expected: %s"
                         % (ours, abs(c0 - c1), tol, x, y))
            if not abs(float(x[60:66]) - float(y[60:66])) <= 0.01 + 1e-9:
                fail("%s: B-factor differs\n  ours:     %s\n  expected: %s" % (ours, x, y))


def main(argv):
    if len(argv) not in (2, 4):
        sys.stderr.write(__doc__)
        return 2
    read_back(argv[1])
    if len(argv) == 4:
        compare(argv[1], argv[2], float(argv[3]))
    print("check_pdb: %s ok" % argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
