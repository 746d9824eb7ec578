#!/usr/bin/env bash
# test_fold.sh - the whole fold, end to end, against both public fixtures:
# every sequence of tiny_a and tiny_b is folded by the esmbatch binary with
# --dump-tensors; tools/check_dump.py holds every dumped tensor to the
# fixtures' tolerance rule (the LM, every trunk pass, the structure module,
# the heads, multimers included); tests/check_pdb.py reads every PDB back
# with gemmi and compares it with the fixture's expected_NAME.esm.pdb text
# (--keep-linker-numbering: the reference's residue numbers); every PDB and
# mmCIF (--format pdb,cif) passes tests/check_structure.py (gemmi and
# Biopython without a warning, the two formats the same).
# The same folds with --chunk-size 3 (not a divisor of any length) must pass
# too, and the demo model must fold data/example.fa.
. "${srcdir:-.}/tests/lib.sh"

need_gemmi
need_biopython

for fx in tiny_a tiny_b; do
	fixture_fa $fx
	for chunk in 0 3; do
		out=$tmp/$fx.c$chunk
		if ! "$bin" -q -i "$tmp/$fx.fa" -o "$out" --weights "$srcdir/tests/data/$fx/weights.safetensors" \
			--chunk-size $chunk --pae --dump-tensors "$out.dump.safetensors" \
			--format pdb,cif --keep-linker-numbering; then
			fail "$fx chunk $chunk: esmbatch exited $?"
			continue
		fi
		check_fixture $fx "$out" "$out.dump.safetensors" "$fx chunk $chunk"
		"$py" "$srcdir/tests/check_structure.py" "$out"/*.pdb "$out"/*.cif > "$out.structure" ||
			fail "$fx chunk $chunk: $(tail -1 "$out.structure")"
		[ "$(ls "$out"/*.cif | wc -l)" -eq "$(ls "$out"/*.pdb | wc -l)" ] ||
			fail "$fx chunk $chunk: not a cif per pdb"
		for pdb in "$out"/*.pdb; do
			[ -s "${pdb%.pdb}.pae.json" ] || fail "$fx: no $(basename "$pdb" .pdb).pae.json"
		done
	done
done

# --num-recycles N runs N + 1 trunk passes, as esm-fold: tiny_a's default
# is 4 passes, so --num-recycles 3 must reproduce the fixture exactly, and
# --num-recycles 0 must stop after pass 0 (whose tensors still match)
d=$srcdir/tests/data/tiny_a
awk 'BEGIN { RS = ">"; ORS = "" } $1 == "len33" { print ">" $0 }' "$tmp/tiny_a.fa" > "$tmp/len33.fa"
for n in 3 0; do
	out=$tmp/recycles$n
	"$bin" -q -i "$tmp/len33.fa" -o "$out" --weights "$d/weights.safetensors" \
		--num-recycles $n --dump-tensors "$out.dump" || fail "--num-recycles $n: exit $?"
	grep -q "RECYCLES $n *\$" "$out/len33.pdb" || fail "--num-recycles $n: REMARK missing"
	"$py" "$srcdir/tools/check_dump.py" "$out.dump" "$d" > "$out.check"
	passes=$(grep 'trunk_s_r[0-9]' "$out.check" | grep -vc MISSING)
	[ "$passes" -eq $((n + 1)) ] || fail "--num-recycles $n: $passes trunk passes dumped"
	if [ $n -eq 3 ]; then
		tail -1 "$out.check" | grep -q ' 0 failed' || fail "--num-recycles 3 differs from the fixture"
	else
		grep -E '(trunk_[sz]|sm_frames|sm_positions|recycle_bins)_r0 .* ok$' "$out.check" | wc -l |
			grep -qx 5 || fail "--num-recycles 0: pass 0 differs from the fixture"
	fi
done

# the README's main job: the demo model on the example proteins
out=$tmp/example
if "$bin" -q -i "$srcdir/data/example.fa" -o "$out" --format pdb,cif \
	--weights "$srcdir/data/demo/esmfold_demo.safetensors"; then
	for pdb in "$out"/*.pdb; do
		"$py" "$srcdir/tests/check_pdb.py" "$pdb" >/dev/null || fail "example: $pdb unreadable"
	done
	"$py" "$srcdir/tests/check_structure.py" "$out"/*.pdb "$out"/*.cif > "$out.structure" ||
		fail "example: $(tail -1 "$out.structure")"
	[ "$(tail -n +2 "$out/summary.tsv" | cut -f6 | sort -u)" = ok ] || fail "example: not all ok"
else
	fail "example: esmbatch exited $?"
fi

finish
