#!/usr/bin/env bash
# test_graphs_emu.sh - CUDA graphs on the emulated card (tests/esmbatch-cuemu):
# one record of tiny_a folded in three passes (--num-recycles 2) with graphs
# (the default) and with ESMBATCH_CUDA_GRAPHS=0 gives a byte-identical PDB
# and summary row (the fold time aside); with graphs each trunk block is recorded in pass 1 (the kernel
# launches between the "recording a graph" and "graph recorded" debug lines:
# K) and replayed after, so the fold queues exactly 2 K fewer kernels from
# the host than without (passes 2 and 3 launch no trunk-block kernel) and
# launches one graph per block and pass.
. "${srcdir:-.}/tests/lib.sh"
bin=${ESMBATCH_CUEMU:-./tests/esmbatch-cuemu}
d=$srcdir/tests/data/tiny_a
awk 'BEGIN { RS = ">"; ORS = "" } $1 == "len33" { print ">" $0 }' "$d/sequences.fa" > "$tmp/len33.fa"
for g in 1 0; do
	ESMBATCH_CUDA_GRAPHS=$g CUEMU_TRACE=1 MALLOC_PERTURB_=165 "$bin" -vv -i "$tmp/len33.fa" -o "$tmp/o$g" \
		--weights "$d/weights.safetensors" --devices cuda --precision fp32 --num-recycles 2 \
		2> "$tmp/t$g" || fail "ESMBATCH_CUDA_GRAPHS=$g: exit $?: $(grep -v '^cuemu:' "$tmp/t$g" | tail -3)"
done
[ -s "$tmp/o1/len33.pdb" ] || fail "no PDB"
cmp -s "$tmp/o0/len33.pdb" "$tmp/o1/len33.pdb" || fail "PDB with and without graphs differ"
# the summary's figures but the fold time (column 10)
cut -f 1-9,11- "$tmp/o0/summary.tsv" > "$tmp/s0"
cut -f 1-9,11- "$tmp/o1/summary.tsv" > "$tmp/s1"
cmp -s "$tmp/s0" "$tmp/s1" || fail "summary (pLDDT, pTM, memory) with and without graphs differ"
on=$(grep -c '^cuemu: launch' "$tmp/t1")
off=$(grep -c '^cuemu: launch' "$tmp/t0")
k=$(awk '/recording a graph/ { r = 1 } /graph recorded/ { r = 0 } r && /^cuemu: launch/ { k++ } END { print k + 0 }' "$tmp/t1")
nb=$(grep -c 'graph recorded' "$tmp/t1")
ng=$(grep -c '^cuemu: graph launch' "$tmp/t1")
ng0=$(grep -c '^cuemu: graph launch' "$tmp/t0")
echo "kernel launches from the host: $off without graphs, $on with; $k recorded in $nb blocks, $ng graph launches"
[ "$k" -gt 0 ] && [ "$nb" -gt 0 ] || fail "no trunk block recorded"
[ $((off - on)) -eq $((2 * k)) ] || fail "passes 2 and 3 launched trunk-block kernels: $off - $on != 2 * $k"
[ "$ng" -eq $((3 * nb)) ] || fail "$ng graph launches for $nb blocks in 3 passes"
[ "$ng0" -eq 0 ] || fail "ESMBATCH_CUDA_GRAPHS=0 launched $ng0 graphs"
grep -q 'CUDA graphs on' "$tmp/t1" && grep -q 'CUDA graphs off' "$tmp/t0" || fail "no debug line saying whether graphs are used"
finish
