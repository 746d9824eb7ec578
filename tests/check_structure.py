#!/usr/bin/env python3
"""check_structure.py - read back esmbatch's PDB and mmCIF files with two
independent parsers and hold the two formats to each other.

usage: check_structure.py FILE...      (NAME.pdb, NAME.cif, or both)

Every file:
1. gemmi reads it with nothing on stderr and no Python warning; a .cif's
   document has no duplicate item and no item without a value.
2. Biopython reads it (PDBParser with PERMISSIVE off, MMCIFParser) with
   every warning an error, and finds the atoms gemmi finds.
A PDB: CRYST1 gives the cell 1 1 1 90 90 90 and space group P 1; every
chain has SEQRES records (gemmi's entity of the chain) whose residues,
less the UNK ones (X: no atoms), are the chain's residues in order.
A NAME.pdb with its NAME.cif:
3. the same atoms in the same order: chain, residue number and name, atom
   name, element, occupancy, and the coordinates and B-factor (pLDDT)
   exactly as printed.
4. the same chains and sequences: the PDB's SEQRES equal the mmCIF's
   _entity_poly_seq of the entity of the chain's _struct_asym.
5. _ma_qa_metric_local: one value per residue with a CA atom, equal to
   that CA's B-factor in the PDB; _ma_qa_metric_global: the pLDDT and pTM
   of the PDB's REMARK 250 lines.
6. The global pLDDT is the mean of the per-residue values (AlphaFold DB):
   the PDB's REMARK 250 MEAN PLDDT that of its CA B-factors, the mmCIF's
   _ma_qa_metric_global that of its _ma_qa_metric_local values (within
   0.01, the roundings to 2 printed decimals).
7. A PDB's TER records: the full 80 columns, one per chain, each after the
   chain's atoms naming the chain's last residue (its SEQRES's last; the
   number of its last atom, or more past residues without atoms).
8. A NAME.pae.json beside the file: one row and one column per residue of
   the chains' sequences (a multimer's linker left out), every value in
   0..max_predicted_aligned_error.
Prints "check_structure: FILE ok" per file; on the first failure prints
it and exits 1.
"""
import contextlib
import json
import os
import sys
import tempfile
import warnings

import gemmi
from Bio.PDB import MMCIFParser, PDBParser


def fail(msg):
    print("check_structure: " + msg)
    sys.exit(1)


@contextlib.contextmanager
def silent(path, who):
    """run the body with fd 2 and Python warnings caught: any -> fail"""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as err, warnings.catch_warnings():
        warnings.simplefilter("error")
        os.dup2(err.fileno(), 2)
        try:
            yield
        except Exception as e:  # a warning turned error, or a parse error
            os.dup2(saved, 2)
            fail("%s: %s: %s: %s" % (path, who, type(e).__name__, e))
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        text = err.read().decode(errors="replace").strip()
        if text:
            fail("%s: %s wrote on stderr: %s" % (path, who, text))


def atoms_of(st):
    """(chain, resnum, icode, resname, atom, element, occ, x, y, z, b) in file order"""
    out = []
    for ch in (st[0] if len(st) else []):
        for r in ch:
            for a in r:
                out.append((ch.name, r.seqid.num, r.seqid.icode, r.name, a.name, a.element.name,
                            round(a.occ, 2), round(a.pos.x, 3), round(a.pos.y, 3),
                            round(a.pos.z, 3), round(a.b_iso, 2)))
    return out


def read_one(path):
    """gemmi's structure of path after checks 1 and 2"""
    is_cif = path.endswith(".cif")
    with silent(path, "gemmi"):
        if is_cif:
            doc = gemmi.cif.read(path)
            doc.check_for_duplicates()
            doc.check_for_missing_values()
            st = gemmi.make_structure_from_block(doc.sole_block())
        else:
            st = gemmi.read_structure(path)
        st.setup_entities()
    if len(st) > 1:
        fail("%s: gemmi finds %d models" % (path, len(st)))
    with silent(path, "Biopython"):
        if is_cif:
            bio = MMCIFParser(QUIET=False).get_structure("s", path)
        else:
            bio = PDBParser(QUIET=False, PERMISSIVE=False).get_structure("s", path)
    n_bio = sum(1 for _ in bio.get_atoms())
    if n_bio != len(atoms_of(st)):
        fail("%s: Biopython reads %d atoms, gemmi %d" % (path, n_bio, len(atoms_of(st))))
    return st


def seqres(st):
    """chain name -> its entity's sequence (SEQRES / _entity_poly_seq)"""
    out = {}
    for ch in (st[0] if len(st) else []):
        ent = st.get_entity_of(ch.get_polymer())
        out[ch.name] = list(ent.full_sequence) if ent else None
    return out


def check_pdb(path, st):
    c = st.cell
    if (c.a, c.b, c.c, c.alpha, c.beta, c.gamma) != (1, 1, 1, 90, 90, 90) or \
            st.spacegroup_hm != "P 1":
        fail("%s: CRYST1 gives %s %s, not the cell 1 1 1 in P 1" % (path, c, st.spacegroup_hm))
    for name, seq in seqres(st).items():
        if not seq:
            fail("%s: chain %s has no SEQRES" % (path, name))
        res = [r.name for r in st[0][name]]
        if [s for s in seq if s != "UNK"] != res:
            fail("%s: chain %s: SEQRES %s, residues %s" % (path, name, seq, res))


def remark(path, key):
    with open(path) as f:
        for line in f:
            if line.startswith("REMARK 250 " + key + " "):
                return float(line.split()[len(key.split()) + 2])
    fail("%s: no REMARK 250 %s" % (path, key))


def check_pair(pdb, cif, sp, sc):
    a, b = atoms_of(sp), atoms_of(sc)
    if len(a) != len(b):
        fail("%s: %d atoms, %s: %d" % (pdb, len(a), cif, len(b)))
    for x, y in zip(a, b):
        if x != y:
            fail("atoms differ\n  %s: %s\n  %s: %s" % (pdb, x, cif, y))
    if seqres(sp) != seqres(sc):
        fail("sequences differ\n  %s: %s\n  %s: %s" % (pdb, seqres(sp), cif, seqres(sc)))
    block = gemmi.cif.read(cif).sole_block()
    # the PDB's CA B-factor of each residue, by its place in its chain's
    # entity (label_seq_id, from the mmCIF's atoms: the PDB has none)
    ca_b = {}
    for x in a:
        if x[4] == "CA":
            ca_b[(x[0], x[1], x[2])] = x[10]
    label = {}
    for ch in sc[0]:
        for r in ch:
            label[(ch.name, r.label_seq)] = (ch.name, r.seqid.num, r.seqid.icode)
    local = block.find("_ma_qa_metric_local.", ["label_asym_id", "label_seq_id", "metric_id",
                                                "metric_value"])
    metric = dict(zip(block.find_values("_ma_qa_metric.id"),
                      zip(block.find_values("_ma_qa_metric.type"),
                          block.find_values("_ma_qa_metric.mode"))))
    seen = {}
    for row in local:
        if metric.get(row[2]) != ("pLDDT", "local"):
            fail("%s: local metric %s is not the local pLDDT" % (cif, row[2]))
        key = label.get((row[0], int(row[1])))
        if key is None or key not in ca_b:
            fail("%s: local pLDDT of %s %s, a residue without a CA" % (cif, row[0], row[1]))
        if float(row[3]) != ca_b[key]:
            fail("%s: local pLDDT %s of %s, the PDB's CA B-factor %.2f"
                 % (cif, row[3], key, ca_b[key]))
        seen[key] = seen.get(key, 0) + 1
    if sorted(seen) != sorted(ca_b) or any(n != 1 for n in seen.values()):
        fail("%s: %d local pLDDT values for %d residues with a CA" % (cif, len(local), len(ca_b)))
    glob = {metric[m][0]: float(v) for m, v in
            zip(block.find_values("_ma_qa_metric_global.metric_id"),
                block.find_values("_ma_qa_metric_global.metric_value"))}
    want = {"pLDDT": remark(pdb, "MEAN PLDDT"), "pTM": remark(pdb, "PTM")}
    if glob != want:
        fail("%s: global metrics %s, the PDB's REMARK 250 %s" % (cif, glob, want))


def mean_close(path, what, got, values):
    if not values:
        fail("%s: no per-residue pLDDT" % path)
    want = sum(values) / len(values)
    if abs(got - want) > 0.01 + 1e-9:
        fail("%s: %s %.2f, the mean of the %d per-residue values %.4f"
             % (path, what, got, len(values), want))


def check_pdb_more(path, st):
    """checks 6 and 7 of a PDB"""
    ca = [a.b_iso for ch in st[0] for r in ch for a in r if a.name == "CA"]
    mean_close(path, "REMARK 250 MEAN PLDDT", remark(path, "MEAN PLDDT"), ca)
    with open(path) as f:
        lines = [l.rstrip("\n") for l in f if l.startswith(("ATOM", "TER"))]
    seq = seqres(st)
    ters = [(k, l) for k, l in enumerate(lines) if l.startswith("TER")]
    if [l[21] for _, l in ters] != [ch.name for ch in st[0]]:
        fail("%s: TER records for chains %s, the chains are %s"
             % (path, [l[21] for _, l in ters], [ch.name for ch in st[0]]))
    for k, l in ters:
        chain = st[0][l[21]]
        if len(l) != 80:
            fail("%s: TER of %d columns, not 80: %s" % (path, len(l), l))
        if k == 0 or lines[k - 1][21] != l[21]:
            fail("%s: TER not after its chain's atoms: %s" % (path, l))
        num, last = int(l[22:26]), chain[len(chain) - 1]
        if l[17:20] != seq[l[21]][-1] or num < last.seqid.num or \
                (num != last.seqid.num) != (seq[l[21]][-1] == "UNK"):
            fail("%s: TER names %s; chain %s's SEQRES ends with %s, its atoms with residue %d"
                 % (path, l[17:27].strip(), l[21], seq[l[21]][-1], last.seqid.num))


def check_cif_more(path):
    """check 6 of an mmCIF"""
    block = gemmi.cif.read(path).sole_block()
    ids = dict(zip(block.find_values("_ma_qa_metric.id"), block.find_values("_ma_qa_metric.name")))
    glob = [float(v) for m, v in zip(block.find_values("_ma_qa_metric_global.metric_id"),
                                     block.find_values("_ma_qa_metric_global.metric_value"))
            if ids.get(m) == "pLDDT"]
    local = [float(v) for v in block.find_values("_ma_qa_metric_local.metric_value")]
    if len(glob) != 1:
        fail("%s: %d global pLDDT values" % (path, len(glob)))
    mean_close(path, "global pLDDT", glob[0], local)


def check_pae(path, st):
    """check 8: path's NAME.pae.json, when there is one"""
    pae = path.rsplit(".", 1)[0] + ".pae.json"
    if not os.path.exists(pae):
        return
    with open(pae) as f:
        doc = json.load(f)
    m, top = doc[0]["predicted_aligned_error"], doc[0]["max_predicted_aligned_error"]
    n = sum(len(s) for s in seqres(st).values())
    if len(m) != n or any(len(row) != n for row in m):
        fail("%s: %d rows of %s values, the structure has %d residues"
             % (pae, len(m), sorted({len(row) for row in m}), n))
    if any(not 0 <= v <= top for row in m for v in row):
        fail("%s: a value outside 0..%s" % (pae, top))


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    read = {}
    for path in argv[1:]:
        st = read_one(path)
        if path.endswith(".pdb"):
            check_pdb(path, st)
            check_pdb_more(path, st)
        else:
            check_cif_more(path)
        check_pae(path, st)
        read[path] = st
    for path in argv[1:]:
        cif = path[:-4] + ".cif"
        if path.endswith(".pdb") and cif in read:
            check_pair(path, cif, read[path], read[cif])
    for path in argv[1:]:
        print("check_structure: %s ok" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
