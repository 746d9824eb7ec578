#!/usr/bin/env bash
# tests/gpu/check.sh - the GPU proof of the CUDA backend, run from a bundle
# (tests/gpu/bundle.sh, `make gpu-bundle`) on a lent machine that can build
# nothing: it runs the bundle's programs as they are (no autoreconf,
# configure, make, apt or pip), its own shared libraries from the bundle's
# lib/, CUDA's (cudart, cuBLAS) and the driver from the machine.
#
#     check.sh [--bundle DIR]      (default: the folder holding check.sh)
#
# On the lent machine, from the bundle's archive (bundle.sh):
#     tar xzf gpu-bundle.tar.gz && gpu-bundle/check.sh
#
# Within $BUDGET seconds (default 300: with the machine's start, 8 minutes),
# each step under a timeout of its own and of what is left (a step that no
# longer fits is skipped and said so), most telling first:
#  1. test_cuda_ops: every backend op on CUDA against the CPU backend
#     (held), 90 s;
#  2. both fixtures folded with --precision fp32 and --dump-tensors,
#     check_dump.py holding every tensor to the fixtures' tolerance (held);
#     the same at bf16 reported (tensors over the fp32 tolerance, worst
#     ratio, atom37 deviation), 30 s each;
#  3. random weights of the full esmfold_v1 size (mkweights --dtype bf16
#     from data/manifest_esmfold_v1.json, in $SCRATCH), 120 s;
#  4. timed folds with --workers 1 (one fold at a time: its seconds and
#     device memory are its own): a 32-residue warm-up alone in a process
#     first (the driver, the page cache of the weights, the clocks), then
#     $LENGTHS (default 256 512 1024) and the warm-up again in one process,
#     in the scheduler's order (longest first; the warm-up's two times
#     bound what a cold process adds to its first fold), 150 s;
#  5. the PyTorch reference (where python3 has torch + transformers):
#     torch_ref.py --fp16-esm, EsmForProteinFolding as published (the
#     language model in fp16, the rest fp32; random init from the same
#     config) on the same device, the warm-up then L = $REF_LENGTH (default
#     1024) in one process, 150 s;
#  6. calibrate at $CALIB_LENGTHS (default 512,1024), 90 s;
#  7. the folds of 4 again at --precision fp32 (reported), 90 s;
#  8. the same FASTA with --workers auto: residues/s of the whole run
#     (reported), 90 s.
# FLOPs of one fold (for TFLOP/s and the share of $PEAK_TFLOPS, default 790:
# an H200's dense bf16) are esmfold_ref.py's count_flops, about 5.4e14 for
# esmfold_v1 at L = 1024.  Targets (reported, not held): at least
# 3x faster than the PyTorch reference and at most half its device memory
# (total - free as the driver sees it, context and weights included, on
# both sides).
#
# Output: stdout is the summary, one line per step as it ends (the first
# lines say what machine and bundle this is), so that a run cut short
# still says what it found; a copy goes to $OUT/summary.txt.  Everything
# else this writes is under $OUT (default: a new /tmp/esmbatch-gpu-check.*)
# -- the logs and tables of every step in $OUT/logs -- except the
# full-size weights (about 7 GB) and the fixtures' dumps, in a new folder
# in $SCRATCH (default ${TMPDIR:-/tmp}), removed at exit.
#
# DEVICE=cpu runs steps 2-8 on the CPU backend (step 1, bf16 and fp32 again
# skipped): a rehearsal of the script on a host without a GPU, e.g. with
# MODEL=DIR/data/tiny_a/config.json LENGTHS="40 60" CALIB_LENGTHS=40,60
# REF_LENGTH=60, and STEP_SCALE=N multiplying every step's timeout
# (tests/gpu/rehearse.sh: in a minimal Debian root, as the lent machine).
#
# Exit status: 0 all held checks passed, 77 no GPU (nothing checked), else 1.
set -uo pipefail

bundle=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = --bundle ] && [ $# -eq 2 ]; then
	bundle=$(cd "$2" && pwd) || exit 1
elif [ $# -ne 0 ]; then
	echo "usage: check.sh [--bundle DIR]" >&2
	exit 1
fi
for f in esmbatch mkweights test_cuda_ops check_dump.py esmfold_ref.py torch_ref.py data/tiny_a; do
	if [ ! -e "$bundle/$f" ]; then
		echo "check.sh: $bundle is no GPU check bundle ($f missing): make gpu-bundle" >&2
		exit 1
	fi
done
budget=${BUDGET:-300}
device=${DEVICE:-cuda}
lengths=${LENGTHS:-256 512 1024}
ref_length=${REF_LENGTH:-1024}
calib_lengths=${CALIB_LENGTHS:-512,1024}
peak=${PEAK_TFLOPS:-790}
model=${MODEL:-$bundle/data/manifest_esmfold_v1.json}
out=${OUT:-$(mktemp -d /tmp/esmbatch-gpu-check.XXXXXX)}
logs=$out/logs
mkdir -p "$logs" || exit 1
scratch=$(mktemp -d "${SCRATCH:-${TMPDIR:-/tmp}}/esmbatch-gpu-scratch.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
# caches the programs would keep in $HOME
export ESMBATCH_FP_CACHE=$scratch/fingerprints.cache XDG_CACHE_HOME=$scratch/cache \
	HF_HOME=$scratch/hf PYTHONDONTWRITEBYTECODE=1
t_start=$(date +%s)
fail=0

# a summary line, on stdout and in $OUT/summary.txt; bad: one that fails the run
note() { printf '%s\n' "$*" | tee -a "$out/summary.txt"; }
bad() { note "FAIL $*"; fail=1; }
left() { echo $(( budget - ($(date +%s) - t_start) )); }
# how a step ended: "exit N", or "out of time" (timeout's 124)
ended() { if [ "$1" -eq 124 ]; then echo "out of time"; else echo "exit $1"; fi; }
# step MAX CMD...: CMD under a timeout of MAX x $STEP_SCALE seconds or
# what is left of the budget, whichever is less; 124 without running it
# when that is under 10 s
step() {
	local t=$(( $1 * ${STEP_SCALE:-1} )) l
	shift
	l=$(left)
	[ "$l" -lt "$t" ] && t=$l
	[ "$t" -ge 10 ] || return 124
	timeout "$t" "$@"
}
finish() {
	note "total $(( $(date +%s) - t_start )) s; logs and tables in $logs"
	if [ "$1" -eq 0 ]; then note "check.sh: all held checks passed"
	elif [ "$1" -ne 77 ]; then note "check.sh: FAILED"; fi
	exit "$1"
}

note "== esmbatch GPU check: ${HOSTNAME:-?}, $(date -u +%Y-%m-%dT%H:%M:%SZ), budget $budget s, device $device"
note "bundle: $bundle ($(sed -n 2p "$bundle/BUNDLE" 2>/dev/null); $(grep '^built' "$bundle/BUNDLE" 2>/dev/null))"
note "host: $(uname -m), $(ldd --version 2>/dev/null | head -1), $(nproc) CPUs"
if command -v nvidia-smi >/dev/null 2>&1; then
	while IFS= read -r line; do note "gpu: $line"; done < <(nvidia-smi \
		--query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>&1)
else
	note "gpu: no nvidia-smi (the programs decide whether a device is present)"
fi

# CUDA's libraries where the programs' RUNPATH (the bundle's lib/, then
# /usr/local/cuda) does not find them: the linker cache, other CUDA
# installs, a pip install's nvidia/ packages
missing=$(for p in esmbatch test_cuda_ops mkweights; do ldd "$bundle/$p"; done |
	awk '$3 == "not" { print $1 }' | sort -u)
if [ -n "$missing" ]; then
	dirs=$(ls -d /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib 2>/dev/null
	       python3 -c 'import nvidia, os; print("\n".join(os.path.join(p, d) for p in nvidia.__path__ for d in os.listdir(p)))' 2>/dev/null)
	for lib in $missing; do
		hit=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l { print $NF; exit }')
		[ -n "$hit" ] || hit=$(find $dirs -maxdepth 2 -name "$lib" 2>/dev/null | head -1)
		[ -n "$hit" ] && LD_LIBRARY_PATH=$(dirname "$hit")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	done
	export LD_LIBRARY_PATH
fi
ldd "$bundle/esmbatch" > "$logs/ldd.txt" 2>&1
if grep -q 'not found' "$logs/ldd.txt"; then
	bad "libraries: $(grep 'not found' "$logs/ldd.txt" | awk '{ print $1 }' | tr '\n' ' ')not found"
	finish 1
fi
note "cuda libraries: $(awk '$1 ~ /^libcu(blas|dart)\.so/ { print $3 }' "$logs/ldd.txt" | tr '\n' ' ')"
note "$("$bundle/esmbatch" version 2>&1 | tr '\n' ' ')"

# --- 1. every op, CUDA against CPU ---
if [ "$device" = cpu ]; then
	note "1. ops: skipped (DEVICE=cpu)"
else
	t0=$(date +%s)
	step 90 "$bundle/test_cuda_ops" > "$logs/ops.out" 2>&1
	rc=$?
	if [ $rc -eq 77 ]; then
		note "1. ops: no CUDA device: nothing checked ($(tail -1 "$logs/ops.out"))"
		finish 77
	fi
	if [ $rc -eq 0 ]; then
		note "1. ops: $(grep -c 'nmse\|bound' "$logs/ops.out") cases within their bounds, $(( $(date +%s) - t0 )) s"
	else
		bad "1. ops: test_cuda_ops $(ended $rc): $(grep -E 'FAILED|ERROR|Failure' "$logs/ops.out" | head -3 | tr '\n' ' ')"
	fi
fi

# --- 2. both fixtures against the golden tolerance ---
for fx in tiny_a tiny_b; do
	d=$bundle/data/$fx
	# the fixture README: lower-case letters are fed as X
	awk '/^>/ { print; next } { gsub(/[a-z]/, "X"); print }' "$d/sequences.fa" > "$logs/$fx.fa"
	for prec in fp32 bf16; do
		if [ "$device" = cpu ] && [ $prec = bf16 ]; then
			note "2. $fx bf16: skipped (the CPU computes in fp32 only)"
			continue
		fi
		o=$logs/$fx.$prec
		t0=$(date +%s%N)
		step 30 "$bundle/esmbatch" -q -i "$logs/$fx.fa" -o "$o" --weights "$d/weights.safetensors" \
			--devices "$device" --precision $prec --dump-tensors "$scratch/$fx.$prec.dump" 2> "$o.err"
		rc=$?
		ms=$(( ($(date +%s%N) - t0) / 1000000 ))
		if [ $rc -ne 0 ]; then
			bad "2. $fx $prec: esmbatch $(ended $rc): $(head -2 "$o.err" | tr '\n' ' ')"
			continue
		fi
		python3 "$bundle/check_dump.py" "$scratch/$fx.$prec.dump" "$d" > "$o.check"
		crc=$?
		# check_dump.py: SEQ TENSOR max diff D tol T ratio R ok|FAIL
		stats=$(awk '$3 == "max" && $4 == "diff" {
				n++; if ($10 != "ok") over++
				if ($9 + 0 > worst) { worst = $9 + 0; at = $1 "/" $2 }
				if ($2 == "atom37_positions" && $5 + 0 > atom) atom = $5 + 0 }
			END { printf "%d of %d tensors over the tolerance, worst ratio %.3f (%s), atom37 max |d| %.3g A",
			      over, n, worst, at, atom }' "$o.check")
		if [ $prec = bf16 ]; then
			note "2. $fx bf16 (reported): $stats; $ms ms"
		elif [ $crc -eq 0 ]; then
			note "2. $fx fp32: $stats; $ms ms"
		else
			bad "2. $fx fp32: $stats; $(grep -E 'FAIL|MISSING' "$o.check" | head -3 | tr '\n' ' ')"
		fi
	done
done

# --- 3. full-size random weights ---
weights=$scratch/weights.safetensors
mkdir -p "$logs/hf" || exit 1
# the HF config of the model, for esmfold_ref.py flops
python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
json.dump(c["config"] if "config" in c and "tensors" in c else c, open(sys.argv[2], "w"))' \
	"$model" "$logs/hf/config.json" || bad "3. cannot read $model"
t0=$(date +%s)
if step 120 "$bundle/mkweights" --config "$model" -o "$weights" --dtype bf16 > "$logs/mkweights.out" 2>&1; then
	note "3. random weights of $(basename "$model"): $(du -h "$weights" | cut -f1) in $(( $(date +%s) - t0 )) s"
else
	bad "3. mkweights $(ended $?): $(tail -2 "$logs/mkweights.out" | tr '\n' ' ')"
	rm -f "$weights"
fi

# --- 4. timed folds, one at a time ---
# one random sequence per length (awk's own generator, seeded), the warm-up
# named warmup, the others lenL
mkfa() {
	awk -v lens="$1" 'BEGIN {
		srand(7); aa = "ACDEFGHIKLMNPQRSTVWY"; n = split(lens, L, " ")
		for (i = 1; i <= n; i++) {
			s = ""; for (k = 0; k < L[i]; k++) s = s substr(aa, int(rand() * 20) + 1, 1)
			printf ">%s\n%s\n", L[i] == 32 && i == 1 ? "warmup" : "len" L[i], s
		} }' > "$2"
}
mkfa "32" "$logs/warmup.fa"
mkfa "32 $lengths" "$logs/lengths.fa"
mkfa "32 $ref_length" "$logs/ref.fa"
# fold NAME MAX FASTA [OPTIONS...]: esmbatch into $logs/NAME, its status line
fold() {
	local name=$1 max=$2 fa=$3 t0=$(date +%s) rc
	shift 3
	step "$max" "$bundle/esmbatch" -q -i "$fa" -o "$logs/$name" --weights "$weights" \
		--devices "$device" "$@" 2> "$logs/$name.err"
	rc=$?
	[ $rc -eq 0 ] || echo "$(ended $rc) after $(( $(date +%s) - t0 )) s: $(tail -2 "$logs/$name.err" | tr '\n' ' ')"
	return $rc
}
# col DIR NAME COLUMN: a column of DIR/summary.tsv's row NAME (the rows a
# stopped run had written: summary.tsv.tmp.*), "-" where there is none
col() {
	local f
	for f in "$1/summary.tsv" "$1"/summary.tsv.tmp*; do
		[ -f "$f" ] || continue
		awk -F'\t' -v n="$2" -v c="$3" 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
			$h["name"] == n { v = $h[c] } END { print v == "" ? "-" : v }' "$f"
		return
	done
	echo -
}
if [ -s "$weights" ]; then
	r=$(fold warm 40 "$logs/warmup.fa" --workers 1) || bad "4. warm-up: $r"
	r=$(fold w1 110 "$logs/lengths.fa" --workers 1) || bad "4. folds --workers 1: $r"
	note "4. warm-up (32 residues) alone in a process: $(col "$logs/warm" warmup seconds) s; again after the others: $(col "$logs/w1" warmup seconds) s"
else
	note "4. folds: skipped (no weights)"
fi
: > "$logs/flops"
for L in $lengths; do
	printf '%s\t%s\n' "$L" "$(python3 "$bundle/esmfold_ref.py" flops "$logs/hf" "$L" 2>> "$logs/flops.err")" \
		>> "$logs/flops"
done
# the esmbatch table: one row per length
gib() { awk -v b="$1" 'BEGIN { if (b == "-" || b < 0) print "-"; else printf "%.1f", b / 2^30 }'; }
if [ -s "$weights" ]; then
	note "4.   L   seconds  res/s  dev GiB  TFLOP/s  % of peak   (--workers 1, default precision: bf16 on a card)"
	for L in $lengths; do
		s=$(col "$logs/w1" "len$L" seconds) st=$(col "$logs/w1" "len$L" status)
		f=$(awk -v L="$L" '$1 == L { print $2 }' "$logs/flops")
		u=$(col "$logs/w1" "len$L" device_used_bytes)
		if [ "$st" = ok ]; then
			note "$(awk -v L="$L" -v s="$s" -v f="${f:-0}" -v g="$(gib "$u")" -v p="$peak" 'BEGIN {
				printf "4. %5d %9.2f %6.0f %8s %8.1f %10.1f", L, s, L / s, g, f / s / 1e12, 100 * f / s / 1e12 / p }')"
		else
			note "4. $(printf '%5d' "$L") $st"
		fi
	done
fi

# --- 5. the PyTorch reference, as published, at one length ---
: > "$logs/torch.jsonl"
if [ ! -s "$weights" ]; then
	note "5. PyTorch reference: skipped (no weights to compare with)"
elif python3 -c 'import torch, transformers' 2>/dev/null; then
	t0=$(date +%s)
	step 150 python3 "$bundle/torch_ref.py" --fp16-esm "$model" "$logs/ref.fa" "$device" 0 \
		> "$logs/torch.jsonl" 2> "$logs/torch.err"
	rc=$?
	[ $rc -eq 0 ] || note "5. PyTorch reference $(ended $rc) after $(( $(date +%s) - t0 )) s: $(tail -1 "$logs/torch.err")"
	while IFS= read -r line; do note "$line"; done < <(python3 - "$logs/torch.jsonl" "$ref_length" \
		"$(col "$logs/w1" "len$ref_length" seconds)" "$(col "$logs/w1" "len$ref_length" device_used_bytes)" <<'EOF'
import json, sys
path, L, s, used = sys.argv[1:5]
ref = {}
for line in open(path):
    r = json.loads(line)
    ref[r.get("name")] = r
t = ref.get("len" + L, {})
built = ref.get("(model built)", {}).get("seconds")
ts, tu = t.get("seconds"), t.get("device_used", t.get("reserved"))
s = float(s) if s not in ("-", "") else None
used = float(used) if used not in ("-", "") and float(used) > 0 else None
gib = lambda b: "%.1f" % (b / 2**30) if b else "-"
print("5. PyTorch as published (fp16 LM) at L %s: %s s, %s GiB%s; esmbatch %s s, %s GiB" % (
    L, "%.2f" % ts if ts else t.get("error", "-")[:40], gib(tu),
    " (model built in %.1f s)" % built if built else "", "%.2f" % s if s else "-", gib(used)))
print("5. esmbatch against it: %s x faster (target >= 3), %s x the memory (target <= 0.5); reported, not held" % (
    "%.2f" % (ts / s) if ts and s else "-", "%.2f" % (used / tu) if used and tu else "-"))
EOF
)
else
	note "5. PyTorch reference: skipped (python3 has no torch + transformers)"
fi

# --- 6. calibrate ---
if [ -s "$weights" ]; then
	t0=$(date +%s)
	step 90 "$bundle/esmbatch" calibrate -q --weights "$weights" --devices "$device" \
		--lengths "$calib_lengths" -o "$logs/quota.tsv" > "$logs/calib.out" 2> "$logs/calib.err"
	rc=$?
	if [ $rc -eq 0 ]; then
		note "6. calibrate at $calib_lengths in $(( $(date +%s) - t0 )) s:"
	else   # the rows done so far are printed all the same
		bad "6. calibrate $(ended $rc) after $(( $(date +%s) - t0 )) s: $(tail -2 "$logs/calib.err" | tr '\n' ' ')"
	fi
	while IFS= read -r line; do note "6.   $line"; done < <(expand -t 13 "$logs/calib.out")
else
	note "6. calibrate: skipped (no weights)"
fi

# --- 7. fp32, 8. auto workers (reported) ---
if [ ! -s "$weights" ]; then
	note "7-8. skipped (no weights)"
else
	if [ "$device" = cpu ]; then
		note "7. fp32 folds: skipped (the CPU computes in fp32 only)"
	else
		r=$(fold f32 90 "$logs/lengths.fa" --workers 1 --precision fp32) || note "7. fp32 folds: $r"
		for L in $lengths; do
			note "7. fp32 L $L: $(col "$logs/f32" "len$L" seconds) s, $(gib "$(col "$logs/f32" "len$L" device_used_bytes)") GiB"
		done
	fi
	t0=$(date +%s%N)
	r=$(fold auto 90 "$logs/lengths.fa" --workers auto) || note "8. --workers auto: $r"
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	res=$(awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
		$h["status"] == "ok" { n += $h["length"] } END { print n + 0 }' "$logs/auto/summary.tsv" 2>/dev/null)
	note "8. --workers auto: ${res:-0} residues in $ms ms, process start and weights included: $(awk -v r="${res:-0}" -v ms=$ms 'BEGIN { printf "%.0f", ms ? 1000 * r / ms : 0 }') residues/s"
fi

[ $fail -eq 0 ] && finish 0
finish 1
