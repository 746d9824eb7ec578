#!/usr/bin/env bash
# test_stream_emu.sh - the language model's layers held in host memory
# (--stream-lm) on the emulated card (tests/esmbatch-cuemu): one record of
# tiny_a (3 language-model layers) folded with 1, 2 and 3 host-held layers
# (3: every layer, the first slot refilled for the third) gives the bits of
# the fold that holds none (PDB; dumped tensors too under the default
# schedule), at fp32 and bf16,
# under the emulator's default schedule (a copy runs only when the compute
# stream waits for it: a layer that does not wait reads its slot unfilled)
# and with CUEMU_COPIES_EARLY=1 (a copy runs as soon as its own stream
# lets it: one that does not wait for the layer still reading its slot
# overwrites it).  The log names the layers and bytes held (as the config
# implies them), and a CPU device says the option does not apply.
. "${srcdir:-.}/tests/lib.sh"
bin=${ESMBATCH_CUEMU:-./tests/esmbatch-cuemu}
d=$srcdir/tests/data/tiny_a
awk 'BEGIN { RS = ">"; ORS = "" } $1 == "len33" { print ">" $0 }' "$d/sequences.fa" > "$tmp/len33.fa"

# fold PREC N EARLY: len33 at precision PREC with N host-held layers; the
# tensors dumped under the default schedule only (a dump downloads, and so
# waits for, every layer's output: the early copies would race nothing)
fold() {
	local o=$tmp/$1.$2.$3
	CUEMU_COPIES_EARLY=$3 MALLOC_PERTURB_=165 "$bin" -i "$tmp/len33.fa" -o "$o" \
		--weights "$d/weights.safetensors" --devices cuda --precision "$1" --stream-lm "$2" \
		${4:+--dump-tensors "$o.dump"} 2> "$o.log" ||
		fail "$1, --stream-lm $2, CUEMU_COPIES_EARLY=$3: exit $?: $(grep -v '^cuemu:' "$o.log" | tail -3)"
}

for prec in fp32 bf16; do
	fold $prec 0 0 dump
	[ -s "$tmp/$prec.0.0/len33.pdb" ] || fail "$prec: no PDB without host-held layers"
	for n in 1 2 3; do
		for early in 0 1; do
			fold $prec $n $early $([ $early = 0 ] && echo dump)
			o=$tmp/$prec.$n.$early
			[ $early = 1 ] || cmp -s "$tmp/$prec.0.0.dump" "$o.dump" ||
				fail "$prec, --stream-lm $n, CUEMU_COPIES_EARLY=$early: dumped tensors differ"
			cmp -s "$tmp/$prec.0.0/len33.pdb" "$o/len33.pdb" ||
				fail "$prec, --stream-lm $n, CUEMU_COPIES_EARLY=$early: PDB differs"
		done
		grep -q "$n of the language model's 3 layers in host memory" "$tmp/$prec.$n.0.log" ||
			fail "$prec, --stream-lm $n: no log line of the host-held layers"
	done
	echo "$prec: 1, 2 and 3 host-held layers, both schedules: the same bits as none"
done

# the bytes held: each layer's six matrices, 4 D^2 + 2 D ffn elements, at 4
# bytes (fp32) or 2 (bf16)
for prec in fp32 bf16; do
	want=$(python3 -c "import json, sys
c = json.load(open(sys.argv[1]))
D, f = c['hidden_size'], c['intermediate_size']
print('%.1f MB' % (3 * (4 * D * D + 2 * D * f) * (4 if sys.argv[2] == 'fp32' else 2) / 1e6))" "$d/config.json" $prec)
	grep -q "layers in host memory ($want)" "$tmp/$prec.3.0.log" ||
		fail "$prec: not $want in host memory: $(grep 'host memory' "$tmp/$prec.3.0.log")"
done

"$bin" -i "$tmp/len33.fa" -o "$tmp/cpu" --weights "$d/weights.safetensors" --devices cpu \
	--stream-lm 2 2> "$tmp/cpu.log" || fail "cpu, --stream-lm 2: exit $?"
grep -q -- "--stream-lm does not apply" "$tmp/cpu.log" || fail "cpu: no line saying --stream-lm does not apply"
finish
