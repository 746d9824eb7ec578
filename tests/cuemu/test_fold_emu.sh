#!/usr/bin/env bash
# test_fold_emu.sh - both public fixtures folded through the CUDA backend
# on the emulated device (tests/esmbatch-cuemu, tests/cuemu) with
# --precision fp32: every dumped tensor within the fixtures' tolerance
# (tools/check_dump.py, the rule the CPU path passes in test_fold.sh) and
# every PDB within the fixture's atom tolerance (tests/check_pdb.py;
# --keep-linker-numbering: the reference's residue numbers).
# The same folds at --precision bf16 print what bf16 costs against fp32
# (tests/cuemu/bf16_report.py: deviation per tensor group, pLDDT, C-alpha
# RMSD; informative, failing only on a missing or non-finite tensor).  A
# bf16 fold of one record must run its attention on the tensor-core kernel
# (flash_attn.cu, CUEMU_TRACE) and in fp32 exactly the GEMMs the precision
# policy names (the emulator's CUEMU_GEMM_LOG): the IPA point term
# (k = 3 Pq + 2), the pLDDT expectation (m = 1, k = 50 bins) and the
# PAE / pTM one (m = 2, k = 64 bins), and a k = 1 product, should any be
# made (the triangle-multiplication biases are added in fp32 in
# ln_linear's gate epilogue, no GEMM); every other GEMM at bf16, the
# triangle products (batch c_z) on bf16 operands with ld on 8 elements.
# The blocks, warps and lanes of every kernel in reverse order
# (CUEMU_REVERSE=1) must give bit-identical tensors and PDB (a difference is
# a race).  Freed host memory is poisoned (MALLOC_PERTURB_), so that a use after free
# fails every time, not by chance.
. "${srcdir:-.}/tests/lib.sh"
bin=${ESMBATCH_CUEMU:-./tests/esmbatch-cuemu}
need_gemmi

for fx in tiny_a tiny_b; do
	d=$srcdir/tests/data/$fx
	fixture_fa $fx
	out=$tmp/$fx
	start=$(date +%s)
	MALLOC_PERTURB_=165 "$bin" -q -i "$tmp/$fx.fa" -o "$out" --weights "$d/weights.safetensors" \
		--devices cuda --precision fp32 --dump-tensors "$out.dump.safetensors" \
		--keep-linker-numbering
	rc=$?
	[ $rc -eq 0 ] || fail "$fx: esmbatch-cuemu exited $rc"
	[ -s "$out.dump.safetensors" ] || continue
	check_fixture $fx "$out" "$out.dump.safetensors" \
		"$fx (emulated cuda, fp32, $(($(date +%s) - start)) s)"
done

# bf16: the emulator rounds the GEMM inputs as the tensor cores would
for fx in tiny_a tiny_b; do
	d=$srcdir/tests/data/$fx
	out=$tmp/$fx.bf16
	MALLOC_PERTURB_=165 "$bin" -q -i "$tmp/$fx.fa" -o "$out" --weights "$d/weights.safetensors" \
		--devices cuda --precision bf16 --dump-tensors "$out.dump.safetensors" ||
		fail "$fx bf16: esmbatch-cuemu exited $?"
	[ -s "$tmp/$fx.dump.safetensors" ] && [ -s "$out.dump.safetensors" ] || continue
	echo "$fx: bf16 against fp32 (emulated cuda)"
	"$py" "$srcdir/tests/cuemu/bf16_report.py" "$tmp/$fx.dump.safetensors" "$out.dump.safetensors" ||
		fail "$fx bf16: tensors missing or not finite"
done

# one record of tiny_a with the schedule reversed: the same bits
d=$srcdir/tests/data/tiny_a
awk 'BEGIN { RS = ">"; ORS = "" } $1 == "len33" { print ">" $0 }' "$tmp/tiny_a.fa" > "$tmp/len33.fa"
for rev in 0 1; do
	CUEMU_REVERSE=$rev MALLOC_PERTURB_=165 "$bin" -q -i "$tmp/len33.fa" -o "$tmp/rev$rev" \
		--weights "$d/weights.safetensors" --devices cuda --precision fp32 \
		--dump-tensors "$tmp/rev$rev.dump" || fail "CUEMU_REVERSE=$rev: exit $?"
done
cmp -s "$tmp/rev0.dump" "$tmp/rev1.dump" || fail "reversed schedule: dumped tensors differ"
cmp -s "$tmp/rev0/len33.pdb" "$tmp/rev1/len33.pdb" || fail "reversed schedule: PDB differs"

# the same record at bf16: the GEMMs the precision policy names in fp32,
# every other one in bf16 (one record of L > 1: at L = 1 other GEMMs have
# k = 1 too)
CUEMU_GEMM_LOG=$tmp/len33.gemms CUEMU_TRACE=1 "$bin" -q -i "$tmp/len33.fa" -o "$tmp/len33.bf16" \
	--weights "$d/weights.safetensors" --devices cuda --precision bf16 2> "$tmp/len33.trace" ||
	fail "len33 bf16: esmbatch-cuemu exited $?: $(grep -v '^cuemu: launch' "$tmp/len33.trace" | head -3)"
# its attention all on the tensor-core kernel (the fp32 one: none)
nf=$(grep -c ': k_flash_attn<' "$tmp/len33.trace")
na=$(grep -c ': k_attn<' "$tmp/len33.trace")
[ "$nf" -gt 0 ] && [ "$na" -eq 0 ] || fail "len33 bf16: $nf flash, $na fp32 attention launches"
echo "len33 bf16 attention: $nf launches of k_flash_attn, none of k_attn"
dp=$("$py" -c "import json, sys
c = json.load(open(sys.argv[1]))['esmfold_config']['trunk']['structure_module']
print(3 * c['num_qk_points'] + 2)" "$d/config.json")
# per GEMM (cuBLAS sizes m n k batch, compute): its class, 32F or 16BF as the policy says
if policy=$(awk -v dp="$dp" '{
	if ($3 == dp) c = "ipa"; else if ($3 == 1) c = "bias"
	else if ($1 == 1 && $3 == 50) c = "plddt"; else if ($1 == 2 && $3 == 64) c = "pae"
	else c = "other"
	seen[c]++
	if ($5 != (c == "other" ? "16BF" : "32F")) { bad++; if (!ex) ex = $0 " (" c ")" }
} END {
	printf "%d ipa, %d bias, %d plddt, %d pae in fp32, %d other in bf16, %d off the policy%s",
	       seen["ipa"], seen["bias"], seen["plddt"], seen["pae"], seen["other"], bad,
	       ex ? ", e.g. " ex : ""
	exit !(seen["ipa"] && seen["plddt"] && seen["pae"] && seen["other"] && !bad)
}' "$tmp/len33.gemms"); then
	echo "len33 bf16 GEMMs: $policy"
else
	fail "len33 bf16 GEMMs: $policy"
fi
# the triangle products (batched over c_z channels) on the bf16 operands
# ln_linear wrote, rows padded to 8 elements (L = 33: ld 40)
cz=$("$py" -c "import json, sys
print(json.load(open(sys.argv[1]))['esmfold_config']['trunk']['pairwise_state_dim'])" "$d/config.json")
if tri=$(awk -v cz="$cz" '$4 == cz { n++; if ($6 != "bf16" || $7 % 8 || $8 % 8) { bad++; if (!ex) ex = $0 } }
END { printf "%d triangle products, %d not on padded bf16 operands%s", n, bad, ex ? ", e.g. " ex : ""
      exit !(n && !bad) }' "$tmp/len33.gemms"); then
	echo "len33 bf16: $tri"
else
	fail "len33 bf16: $tri"
fi

finish
