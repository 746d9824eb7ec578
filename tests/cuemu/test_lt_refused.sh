#!/bin/sh
# test_lt_refused.sh - where cuBLASLt has no algo for the sequence
# transition's products (a card or library without a kernel for them),
# the CUDA backend runs the rows not yet done on the CUDA cores, says so
# once, and the results stay within test_seq_transition's bound.  On the
# emulator CUEMU_LT_REFUSE=N has the heuristic answer N queries and find
# no algo for any later one.  test_seq_transition's cases make two queries a chunk (its first seven cases one chunk each:
# 14), then h 65,536 at d 48 in two chunks of 120 and 80 rows: N = 15
# refuses the first chunk's output product (its hidden one done, x not
# yet written), N = 16 the second chunk's hidden product (the first
# chunk's rows done: run again, they would be off by a whole transition);
# every later case runs on the CUDA cores whole.  And the GEMMs with a
# bf16 weight, their bias and ReLU cuBLASLt's epilogue where it has an
# algo: with none (N = 0) each slice takes the bias pass, cublasGemmEx and
# the ReLU pass instead, within the same bound.
bin=./tests/test_cuda_ops_emu
fails=0

for run in test_seq_transition:15 test_seq_transition:16 test_gemm_bf16_weight:0; do
	t=${run%:*} n=${run#*:}
	out=$(TEST_CUDA_OPS_ONLY=$t CUEMU_LT_REFUSE=$n "$bin" 2>&1)
	rc=$?
	echo "$out" | grep -E 'R200 d48|R150|bias|cuBLASLt|FAILED' | head -8
	[ $rc -eq 0 ] || { echo "FAIL: $t, CUEMU_LT_REFUSE=$n: exit $rc"; fails=$((fails + 1)); }
	nw=$(echo "$out" | grep -c "cuBLASLt cannot run a")
	[ "$nw" -eq 1 ] || { echo "FAIL: $t, CUEMU_LT_REFUSE=$n: $nw warnings, not 1"; fails=$((fails + 1)); }
done
echo "test_lt_refused: $fails failure(s)"
[ $fails -eq 0 ]
