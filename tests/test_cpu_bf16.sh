#!/usr/bin/env bash
# test_cpu_bf16.sh - --precision bf16 on the CPU (oneDNN, cpu_dnnl.c) on
# both of its paths: natively with ESMBATCH_CPU_DNNL=1 (every bf16 GEMM on
# oneDNN's bf16 matmul where the host has one: AMX or AVX512-BF16) and
# with DNNL_MAX_CPU_ISA=AVX2 (no bf16 matmul: the rounded operands widened
# to fp32 on the own kernels), so every host tests both it can run.
# 1. tests/test_cpu_dnnl on each: every bf16 GEMM within its rounding
#    bound of the double references (derived there), oneDNN's matmul seen
#    running (DNNL_VERBOSE) natively where the ISA has bf16, never at AVX2.
# 2. both fixtures folded at fp32 (the fixtures' tolerance, unchanged) and
#    at bf16 on each path: every record ok and every tensor finite, the log
#    naming oneDNN's ISA, and the language model's largest deviation from
#    fp32 (relative to its largest value; tests/cuemu/bf16_report.py, which
#    prints the rest: trunk, structure module, heads, pLDDT, PAE, pTM,
#    C-alpha RMSD) within the first-order bf16 bound (4 L + 2) 2u: u = 2^-8,
#    each GEMM's two rounded operands 2u, 4 GEMMs in series per layer
#    (q/k/v, out, fc1, fc2) and 2 in the LM head ([benchmarks.md]).
# Skipped (77) in a build without oneDNN, where bf16 on the CPU is refused.
. "${srcdir:-.}/tests/lib.sh"

if ! "$bin" --version | grep -q '^onednn: [0-9]'; then
	echo "SKIP: built without oneDNN ($("$bin" --version | grep '^onednn'))"
	exit 77
fi
need_gemmi
isa=$("$bin" --version | sed -n 's/^onednn: [^ ]* (ISA \([a-z0-9_]*\).*/\1/p')
case $isa in avx512_core_bf16|avx512_core_amx) hasbf16=1 ;; *) hasbf16=0 ;; esac
echo "oneDNN's ISA here: $isa"

# run_mode MODE CMD...: CMD with MODE's environment (native: every bf16
# GEMM on oneDNN; avx2: oneDNN capped at AVX2)
run_mode() {
	local mode=$1
	shift
	if [ "$mode" = native ]; then ESMBATCH_CPU_DNNL=1 "$@"; else DNNL_MAX_CPU_ISA=AVX2 "$@"; fi
}

# --- 1. the GEMMs ---
for mode in native avx2; do
	log=$tmp/gemm.$mode
	[ -x ./tests/test_cpu_dnnl ] || { echo "test_cpu_dnnl: not built (no cmocka)"; break; }
	if ! run_mode $mode env DNNL_VERBOSE=1 ./tests/test_cpu_dnnl > "$log" 2>&1; then
		fail "test_cpu_dnnl ($mode): $(grep -E 'ERROR|FAILED' "$log" | head -3)"
		continue
	fi
	n=$(grep -c 'exec,cpu,matmul' "$log")
	echo "test_cpu_dnnl ($mode): passed, $n oneDNN matmuls; $(grep -m1 "oneDNN's ISA" "$log")"
	if [ $mode = native ] && [ $hasbf16 = 1 ] && [ "$n" -eq 0 ]; then
		fail "test_cpu_dnnl (native, $isa): no GEMM ran on oneDNN's bf16 matmul"
	fi
	[ $mode = avx2 ] && [ "$n" -ne 0 ] && fail "test_cpu_dnnl (avx2): $n GEMMs on oneDNN, none expected"
done

# --- 2. the folds ---
for fx in tiny_a tiny_b; do
	d=$srcdir/tests/data/$fx
	fixture_fa $fx
	out=$tmp/$fx.fp32
	if ! "$bin" -q -i "$tmp/$fx.fa" -o "$out" --weights "$d/weights.safetensors" --devices cpu \
		--precision fp32 --dump-tensors "$out.dump" --keep-linker-numbering; then
		fail "$fx fp32: esmbatch exited $?"
		continue
	fi
	check_fixture $fx "$out" "$out.dump" "$fx (cpu, fp32)"
	layers=$("$py" -c "import json, sys; print(json.load(open(sys.argv[1]))['num_hidden_layers'])" \
		"$d/config.json")
	bound=$("$py" -c "import sys; print((4 * int(sys.argv[1]) + 2) * 2 * 2 ** -8)" "$layers")
	for mode in native avx2; do
		o=$tmp/$fx.bf16.$mode
		run_mode $mode "$bin" -i "$tmp/$fx.fa" -o "$o" --weights "$d/weights.safetensors" \
			--devices cpu --precision bf16 --dump-tensors "$o.dump" --keep-linker-numbering 2> "$o.log"
		rc=$?
		if [ $rc -ne 0 ]; then
			fail "$fx bf16 ($mode): esmbatch exited $rc: $(grep -E 'error|warn' "$o.log" | head -3)"
			continue
		fi
		grep -q "oneDNN's ISA $([ $mode = avx2 ] && echo avx2 || echo "$isa"):" "$o.log" ||
			fail "$fx bf16 ($mode): the log does not name oneDNN's ISA: $(grep -m1 ISA "$o.log")"
		nok=$(awk -F'\t' 'NR > 1 && $6 == "ok"' "$o/summary.tsv" | wc -l)
		[ "$nok" -eq "$(grep -c '^>' "$tmp/$fx.fa")" ] || fail "$fx bf16 ($mode): $nok records ok"
		echo "$fx: bf16 ($mode) against fp32 on the CPU"
		"$py" "$srcdir/tests/cuemu/bf16_report.py" "$out.dump" "$o.dump" "$bound" > "$o.report"
		rc=$?
		cat "$o.report"
		[ $rc -eq 0 ] || fail "$fx bf16 ($mode): $(tail -1 "$o.report")"
	done
done

finish
