#!/bin/sh
# test_sass.sh - the custom kernels judged at the instruction level: every
# kernels/*.cu compiled for sm_90 (nvcc), disassembled (cuobjdump -sass,
# with nvdisasm), and every kernel of them must use no local memory
# (spills, local arrays) and no generic loads / stores (shared memory
# reached through a pointer whose address space was lost; tests/
# sass_check.py names each kernel that does).  The attention kernel, every
# k_flash_attn instantiation, must moreover keep the HMMA share
# of its main loop's fast path (tests/sass_check.py) at least 1/8 at head
# widths 64 and 32 (measured with nvcc 13.0: 0.235 and 0.142-0.149); at 16
# the floor is 1/12 (measured 0.088-0.092): the online softmax costs some
# four instructions per score and lane whatever the width (a maximum, an
# FFMA and an exp2 each, a bf16 pack per pair; the row sums are an mma)
# while the tensor-core work per score is proportional to the width, so
# 1/8 is out of reach there.  The floors catch a regression (the WMMA
# kernel this one replaced: 0.037 at 32, 0.022 at 16, and generic memory
# throughout).  The fused layer-norm linear (k_ln_linear_bf16, persistent
# blocks: its outermost loop is over row tiles) is judged on its product
# loops, every innermost loop with HMMA (tests/sass_check.py's :inner):
# their share at least 3/8 (measured 0.457: one A fragment for up to 4
# weight tiles), and it and the fp32 k_ln_linear_f32 call no subroutine
# (:nocall: no int64 division or remainder, no IEEE division's slow
# path; the kernels before them: 5 and 8 calls per kernel).  The
# triangle multiplication's output side (k_trimul_out_bf16<CH>, persistent
# over row tiles) likewise on its product loops (:inner): at least 1/3
# for c <= 128 (measured 0.364: one A fragment for 4 weight tiles, two
# 16-k steps unrolled) and 1/4 for c <= 256 (measured 0.267, one step:
# its row of 64 registers leaves no room for two), and it and
# k_trimul_out_f32 call no subroutine (the kernels before them: 6 and 10
# calls, int64 row arithmetic).  The other
# tensor-core kernels' HMMA shares are not held to a floor (a product per
# 16-column tile of a layer norm's output, their loops mostly its
# epilogue).  The pair transition's k_transition_bf16<8> (c_z 128,
# persistent, weights staged through shared memory) likewise: its
# product loop's HMMA share at least 1/4 (measured 0.306: per 32 hidden
# units 64 HMMA, 34 LDSM, the bias-ReLU epilogue into shared memory; the
# kernel before it: 0.158), and it and its test-model instances
# k_transition_bf16<1, 2> call no subroutine (the kernel before: 4-8
# calls, IEEE divisions in the layer norm).  The sequence transition's
# products (k_seqtr_hidden, k_seqtr_out; both operands staged by
# cp.async) on their product loops (:inner), none of which may load
# from global memory (:noldg: every operand through shared memory,
# LDSM), none calling a subroutine, nor its k_seqtr_ln: at 32-row warp
# tiles (<2>) an HMMA share of at least 1/4 (measured 0.340: 16 HMMA, 8
# LDSM per 32-k stage), at 16-row ones (<1>) 1/8 (0.154-0.195); the
# kernel before them, k_transition_wide, fails these rules (4-8 calls,
# 32-144 LDG of weight fragments in its product loops).  A --check that
# names no kernel fails too (sass_check.py).  Skips (77) without
# nvcc or cuobjdump (.ci/run installs PyPI's nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm; found on PATH, in $CUOBJDUMP's directory, in
# /usr/local/cuda/bin or in python3's nvidia/*/bin).
srcdir=${srcdir:-.}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "SKIP: no nvcc"; exit 77; }
if [ -z "$CUOBJDUMP" ]; then
	CUOBJDUMP=$(command -v cuobjdump || true)
	[ -n "$CUOBJDUMP" ] || [ ! -x /usr/local/cuda/bin/cuobjdump ] || CUOBJDUMP=/usr/local/cuda/bin/cuobjdump
	[ -n "$CUOBJDUMP" ] || CUOBJDUMP=$(python3 -c '
import glob, os, sys
for p in sys.path:
    for f in glob.glob(os.path.join(p, "nvidia", "*", "bin", "cuobjdump")):
        print(f); sys.exit(0)' 2>/dev/null)
fi
[ -n "$CUOBJDUMP" ] && [ -x "$CUOBJDUMP" ] || { echo "SKIP: no cuobjdump"; exit 77; }
PATH=$(dirname "$CUOBJDUMP"):$PATH
command -v nvdisasm >/dev/null 2>&1 || { echo "SKIP: no nvdisasm beside cuobjdump"; exit 77; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for cu in "$srcdir"/kernels/*.cu; do
	n=$(basename "$cu" .cu)
	"$NVCC" -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -Xptxas -v \
		-I"$srcdir/src" -I"$srcdir/kernels" -I. -c "$cu" -o "$tmp/$n.o" \
		2>"$tmp/$n.log" || { cat "$tmp/$n.log"; exit 1; }
	grep -E 'spill' "$tmp/$n.log" | grep -v ' 0 bytes spill stores, 0 bytes spill loads' | sed "s|^|$n: |"
	"$CUOBJDUMP" -sass "$tmp/$n.o" >>"$tmp/all.sass" || exit 1
done
python3 "$srcdir/tests/sass_check.py" "$tmp/all.sass" --check 'k_flash_attnILi64=1/8' \
	--check 'k_flash_attnILi32=1/8' --check 'k_flash_attnILi16=1/12' \
	--check 'k_ln_linear_bf16=3/8:inner:nocall' --check 'k_ln_linear_f32=0:nocall' \
	--check 'k_transition_bf16ILi8=1/4:inner:nocall' --check 'k_transition_bf16=0:inner:nocall' \
	--check 'k_trimul_out_bf16ILi64=1/4:inner:nocall' --check 'k_trimul_out_bf16=1/3:inner:nocall' \
	--check 'k_trimul_out_f32=0:nocall' --check 'k_seqtr_(hidden|out)ILi2=1/4:inner:nocall:noldg' \
	--check 'k_seqtr=1/8:inner:nocall:noldg' --check '.=0'
