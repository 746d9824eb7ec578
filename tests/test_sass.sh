#!/bin/sh
# test_sass.sh - the custom kernels judged at the instruction level: every
# kernels/*.cu compiled for sm_90 (nvcc), disassembled (cuobjdump -sass,
# with nvdisasm), and every kernel of them must use no local memory
# (spills, local arrays) and no generic loads / stores (shared memory
# reached through a pointer whose address space was lost; tests/
# sass_check.py names each kernel that does), and every kernel that
# synchronises its block (BAR: it shares data through shared memory)
# must write it by STS / LDGSTS and read it by LDS / LDSM.  Each
# tensor-core kernel is held to an HMMA share floor on its main loop (a
# kernel held to one must have HMMA at all: one whose mma became scalar
# FMA fails) and, with :ldsm, its main loop must take fragments by LDSM
# (ldmatrix) and read no global memory (staged operands).  The floors,
# with the shares measured with nvcc 13.0 (tests/sass_check.py's fast
# paths):
#   k_flash_attn, main loop    D 64: 1/8 (0.231); D 32: 1/8 (0.162-
#     0.163); D 16: 1/12 (0.105: the online softmax costs some three
#     instructions per score and lane whatever the width, the tensor-core
#     work per score is proportional to it); the rotary instances (<.., ..,
#     true>: ESM-2's D 64, the others only in tests), k rotated in the
#     loop: D 64 1/8 (0.137), D 32 1/10 (0.108-0.109), D 16 1/14 (0.080-
#     0.084).  The WMMA kernel it replaced: 0.037 at 32, 0.022 at 16,
#     generic memory throughout.
#   k_ln_linear_bf16 (persistent over row tiles: :inner, every innermost
#     loop with HMMA is a main loop): 3/8 (0.457: one A fragment for up
#     to 4 weight tiles); it and k_ln_linear_f32 call no subroutine
#     (:nocall: no int64 division, no IEEE division's slow path; the
#     kernels before: 5 and 8 calls).
#   k_transition_bf16 (:inner): <8> (c_z 128) 1/4 (0.306: per 32 hidden
#     units 64 HMMA, 34 LDSM, the bias-ReLU epilogue; the kernel before
#     it 0.158); the test models' <2> 1/10 (0.128), <1> 1/16 (0.074);
#     no calls (before: 4-8, IEEE divisions in the layer norm).
#   the sequence transition's layer norm, k_seqtr_ln, calls none (its
#     products are cuBLASLt's).
#   k_trimul_out_bf16 (:inner): <32> (c <= 128) 1/3 (0.364: one A
#     fragment for 4 weight tiles, two 16-k steps unrolled), <64> (c <=
#     256) 1/4 (0.267: one step, its row of 64 registers leaves no room
#     for two); it and k_trimul_out_f32 call no subroutine (before: 6 and
#     10 calls, int64 row arithmetic).
# A --check that names no kernel fails too (sass_check.py).  Skips (77) without
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
python3 "$srcdir/tests/sass_check.py" "$tmp/all.sass" --check 'k_flash_attnILi32ELi.ELb1=1/10:ldsm' \
	--check 'k_flash_attnILi16ELi.ELb1=1/14:ldsm' --check 'k_flash_attnILi64=1/8:ldsm' \
	--check 'k_flash_attnILi32=1/8:ldsm' --check 'k_flash_attnILi16=1/12:ldsm' \
	--check 'k_ln_linear_bf16=3/8:inner:nocall:ldsm' --check 'k_ln_linear_f32=0:nocall' \
	--check 'k_transition_bf16ILi8=1/4:inner:nocall:ldsm' --check 'k_transition_bf16ILi2=1/10:inner:nocall:ldsm' \
	--check 'k_transition_bf16ILi1=1/16:inner:nocall:ldsm' --check 'k_seqtr_ln=0:nocall' \
	--check 'k_trimul_out_bf16ILi64=1/4:inner:nocall:ldsm' --check 'k_trimul_out_bf16=1/3:inner:nocall:ldsm' \
	--check 'k_trimul_out_f32=0:nocall' --check '.=0'
