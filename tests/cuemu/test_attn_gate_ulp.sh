#!/bin/sh
# test_attn_gate_ulp.sh - test_attn_gate holds the gated attention to the
# bound derived in tests/test_cuda_ops.c, not to the host expf's bits: on
# the emulator with the kernels' expf 2 ulp off (CUEMU_EXPF_ULP=2, as far
# as a card's may be) it passes, while a comparison bit for bit with the
# host's expf would refuse results (its count of those is not 0); 16 ulp
# off, beyond any card's, it fails.
bin=./tests/test_cuda_ops_emu
fails=0

out=$(TEST_CUDA_OPS_ONLY=test_attn_gate CUEMU_EXPF_ULP=2 "$bin" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: expf 2 ulp off: exit $rc"; fails=$((fails + 1)); }
nbits=$(echo "$out" | awk '/not the host expf/ { for (i = 1; i < NF; i++) if ($i == "of") n += $(i - 1) }
	END { print n + 0 }')
[ "$nbits" -gt 0 ] || { echo "FAIL: expf 2 ulp off: every result has the host expf's bits"; fails=$((fails + 1)); }
echo "expf 2 ulp off: $nbits results a bit-for-bit comparison would refuse"

out=$(TEST_CUDA_OPS_ONLY=test_attn_gate CUEMU_EXPF_ULP=16 "$bin" 2>&1)
rc=$?
echo "$out" | grep -E 'FAILED|not the ungated' | head -3
[ $rc -ne 0 ] || { echo "FAIL: expf 16 ulp off passed"; fails=$((fails + 1)); }
echo "test_attn_gate_ulp: $fails failure(s)"
[ $fails -eq 0 ]
