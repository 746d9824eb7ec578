#!/usr/bin/env bash
# test_structures.sh - what fold writes for structures beyond the fixture
# checks of test_fold.sh: --format (pdb, cif, both; a bad value is one
# line, exit 2); a multimer's chains each numbered from 1 with their own
# SEQRES, and with --keep-linker-numbering the reference's numbers
# (tiny_a's dimer, tiny_b's trimer, against expected_NAME.esm.pdb), the
# atoms the same either way; split multimers whose fragments carry the
# record's chain letters and per-chain numbers, their .cif renamed with
# the .pdb; resume: --format adding cif refolds, the same run skips, the
# numbering option refolds the multimers only; a killed run's NAME.cif.tmp
# removed.  Every structure file passes tests/check_structure.py (with
# the multimers' PAE), and summary.tsv's mean pLDDT is the files'.
. "${srcdir:-.}/tests/lib.sh"

need_gemmi
need_biopython
chk() { "$py" "$srcdir/tests/check_structure.py" "$@" > "$tmp/chk.out" || fail "$(tail -1 "$tmp/chk.out")"; }

# --- --format --------------------------------------------------------------
for bad in pdb, xyz "pdb,mmcif" ""; do
	"$bin" -i "$demo" -o "$tmp/bad" --weights "$demo" --format "$bad" 2>"$tmp/bad.err"
	rc=$?
	[ $rc -eq 2 ] || fail "--format '$bad': exit $rc, expected 2"
	[ "$(wc -l < "$tmp/bad.err")" -eq 1 ] && grep -q -- '--format' "$tmp/bad.err" ||
		fail "--format '$bad': not one line naming --format: $(cat "$tmp/bad.err")"
done
printf '>m1\nMKTAYIAKQRQISFVKSHF\n>m2\nGSHMSELKNV\n' > "$tmp/two.fa"
"$bin" -q -i "$tmp/two.fa" -o "$tmp/cifonly" --weights "$demo" --num-recycles 0 --format cif ||
	fail "--format cif: exit $?"
ls "$tmp/cifonly" | grep -q '\.pdb$' && fail "--format cif: a PDB written"
[ "$(tail -n +2 "$tmp/cifonly/summary.tsv" | cut -f3 | tr '\n' ' ')" = "m1.cif m2.cif " ] ||
	fail "--format cif: the file column does not name the mmCIF"
chk "$tmp/cifonly"/*.cif

# --- multimer numbering ----------------------------------------------------
# per chain from 1 by default; the reference's with --keep-linker-numbering;
# the atoms identical but for the numbers
for fx in tiny_a tiny_b; do
	fixture_fa $fx
	w=$srcdir/tests/data/$fx/weights.safetensors
	for num in chain model; do
		opt=; [ $num = model ] && opt=--keep-linker-numbering
		"$bin" -q -i "$tmp/$fx.fa" -o "$tmp/$fx.$num" --weights "$w" --format pdb,cif --pae $opt ||
			fail "$fx $num: exit $?"
		chk "$tmp/$fx.$num"/*.pdb "$tmp/$fx.$num"/*.cif
		# summary.tsv's mean pLDDT is the files' global one
		tail -n +2 "$tmp/$fx.$num/summary.tsv" | while IFS=$'\t' read -r _ name _ _ _ _ _ p _; do
			grep -q "^REMARK 250 MEAN PLDDT $p " "$tmp/$fx.$num/$name.pdb" ||
				echo "$name: summary.tsv's pLDDT $p is not its PDB's"
		done > "$tmp/plddt.out"
		[ -s "$tmp/plddt.out" ] && fail "$fx $num: $(head -1 "$tmp/plddt.out")"
	done
	"$py" - "$tmp/$fx.fa" "$tmp/$fx.chain" "$tmp/$fx.model" "$srcdir/tests/data/$fx" <<'PY' ||
import sys, gemmi
fa, chain_dir, model_dir, ref = sys.argv[1:]
recs = {}
for block in open(fa).read().split(">")[1:]:
    name, seq = block.split("\n", 1)
    # letters outside the 20 amino acids are X (no atoms), as the model reads them
    recs[name.split()[0]] = "".join(c if c in "ACDEFGHIKLMNPQRSTVWY:" else "X"
                                    for c in seq.replace("\n", ""))
multi = 0
for name, seq in recs.items():
    chains = seq.split(":")
    a = gemmi.read_structure("%s/%s.pdb" % (chain_dir, name))
    b = gemmi.read_structure("%s/%s.pdb" % (model_dir, name))
    a.setup_entities()
    want = [chr(ord("A") + i) for i in range(len(chains))]
    if [ch.name for ch in a[0]] != want:
        sys.exit("%s: chains %s, expected %s" % (name, [ch.name for ch in a[0]], want))
    for k, ch in enumerate(a[0]):
        seqres = a.get_entity_of(ch.get_polymer()).full_sequence
        if gemmi.one_letter_code(seqres).upper() != chains[k]:
            sys.exit("%s chain %s: SEQRES %s, the record's chain %s"
                     % (name, ch.name, gemmi.one_letter_code(seqres), chains[k]))
        nums = [r.seqid.num for r in ch]
        # X residues have no atoms: each residue's number is its place in the chain
        places = [i + 1 for i, c in enumerate(chains[k]) if c != "X"]
        if nums != places:
            sys.exit("%s chain %s: numbered %s, expected %s" % (name, ch.name, nums, places))
    # the reference numbering: the fixture's PDB
    ref_nums = [(l[21], int(l[22:26])) for l in open("%s/expected_%s.esm.pdb" % (ref, name))
                if l.startswith("ATOM")]
    got = [(ch.name, r.seqid.num) for ch in b[0] for r in ch for _ in r]
    if got != ref_nums:
        sys.exit("%s: --keep-linker-numbering gives numbers other than the reference's" % name)
    pa = [(ch.name, r.name, x.name, x.pos.tolist(), x.b_iso) for ch in a[0] for r in ch for x in r]
    pb = [(ch.name, r.name, x.name, x.pos.tolist(), x.b_iso) for ch in b[0] for r in ch for x in r]
    if pa != pb:
        sys.exit("%s: the atoms differ between the two numberings" % name)
    multi += len(chains) > 1
if multi == 0:
    sys.exit("no multimer in the fixture")
PY
		fail "$fx: multimer numbering"
done

# --- split multimers: the record's chains and numbers in each fragment -----
# the halving point inside chain B; inside chain A (a fragment spanning
# the linker); a trimer
mkfa 11 "$tmp/split.fa" s1=60:140 s2=150:50 s3=70:40:90
for num in chain model; do
	opt=; [ $num = model ] && opt=--keep-linker-numbering
	"$bin" -q -i "$tmp/split.fa" -o "$tmp/split.$num" --weights "$demo" --num-recycles 0 \
		--devices sim:3M,sim:2500K --format pdb,cif $opt || fail "split $num: exit $?"
	ls "$tmp/split.$num" | grep -q frag && fail "split $num: unrenamed fragments left"
	chk "$tmp/split.$num"/*.pdb "$tmp/split.$num"/*.cif
	"$py" - "$tmp/split.fa" "$tmp/split.$num" $num <<'PY' || fail "split $num: fragment numbering"
import os, sys, gemmi
fa, out, num = sys.argv[1:]
recs = {}
for block in open(fa).read().split(">")[1:]:
    name, seq = block.split("\n", 1)
    recs[name] = seq.replace("\n", "")
rows = [l.rstrip("\n").split("\t") for l in open(out + "/summary.tsv")][1:]
for row in rows:
    name, files, status = row[1], row[2].split(","), row[5]
    if status != "split":
        sys.exit("%s: %s, expected split" % (name, status))
    chains = recs[name].split(":")
    got = {}
    for f in files:
        if not os.path.exists(os.path.join(out, f[:-4] + ".cif")):
            sys.exit("%s: no mmCIF beside %s" % (name, f))
        st = gemmi.read_structure(os.path.join(out, f))
        for ch in st[0]:
            got.setdefault(ch.name, []).extend((r.seqid.num, gemmi.find_tabulated_residue(r.name).one_letter_code.upper()) for r in ch)
    want = {}
    at = 0
    for c, s in enumerate(chains):
        first = 1 if num == "chain" else at + 512 * c + 1
        want[chr(ord("A") + c)] = [(first + i, s[i]) for i in range(len(s))]
        at += len(s) + 25
    if got != want:
        sys.exit("%s: fragments give chains/numbers %s, expected %s"
                 % (name, {k: (v[0], v[-1], len(v)) for k, v in got.items()},
                    {k: (v[0], v[-1], len(v)) for k, v in want.items()}))
PY
done
grep -q 'REMARK 250 FRAGMENT SEQUENCE 1-' "$tmp/split.chain/s1.part1of"*.pdb || fail "split: no FRAGMENT remark"
grep -q "_ma_protocol_step.details.*fragment: SEQUENCE 1-" "$tmp/split.chain/s1.part1of"*.cif ||
	fail "split: the mmCIF does not say it is a fragment"

# --- resume ----------------------------------------------------------------
fixture_fa tiny_a
w=$srcdir/tests/data/tiny_a/weights.safetensors
skips() { grep -c '"event":"skip"' "$1/run.jsonl"; }
n=$(grep -c '^>' "$tmp/tiny_a.fa")
"$bin" -q -i "$tmp/tiny_a.fa" -o "$tmp/res" --weights "$w" --num-recycles 0 || fail "resume 1: exit $?"
ls "$tmp/res" | grep -q '\.cif$' && fail "resume 1: --format pdb wrote a cif"
"$bin" -q -i "$tmp/tiny_a.fa" -o "$tmp/res" --weights "$w" --num-recycles 0 --format pdb,cif ||
	fail "resume 2: exit $?"
[ "$(skips "$tmp/res")" -eq 0 ] || fail "resume 2: --format adding cif skipped records"
[ "$(ls "$tmp/res"/*.cif | wc -l)" -eq "$n" ] || fail "resume 2: not a cif per record"
"$bin" -q -i "$tmp/tiny_a.fa" -o "$tmp/res" --weights "$w" --num-recycles 0 --format cif,pdb ||
	fail "resume 3: exit $?"
[ "$(skips "$tmp/res")" -eq "$n" ] || fail "resume 3: the same run refolded"
rm "$tmp/res/len7.cif"
"$bin" -q -i "$tmp/tiny_a.fa" -o "$tmp/res" --weights "$w" --num-recycles 0 --format pdb,cif ||
	fail "resume 4: exit $?"
[ "$(skips "$tmp/res")" -eq $((n - 1)) ] && [ -s "$tmp/res/len7.cif" ] ||
	fail "resume 4: a record without its cif not refolded"
touch "$tmp/res/len1.cif.tmp.999999" "$tmp/res/keep.cif.tmp.x"
"$bin" -q -i "$tmp/tiny_a.fa" -o "$tmp/res" --weights "$w" --num-recycles 0 --format pdb,cif \
	--keep-linker-numbering || fail "resume 5: exit $?"
[ "$(skips "$tmp/res")" -eq $((n - 1)) ] || fail "resume 5: --keep-linker-numbering: not the multimer alone refolded"
grep -q '^ATOM.* B 557 ' "$tmp/res/dimer.pdb" || fail "resume 5: dimer not renumbered"
[ -e "$tmp/res/len1.cif.tmp.999999" ] && fail "a killed run's cif temporary left"
[ -e "$tmp/res/keep.cif.tmp.x" ] || fail "a file not ours was removed"
chk "$tmp/res"/*.pdb "$tmp/res"/*.cif

finish
