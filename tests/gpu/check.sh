#!/usr/bin/env bash
# tests/gpu/check.sh - the GPU proof of the CUDA backend (issue 8), for a
# host with a GPU: one run, one summary, within ten minutes on an H200.
# Run from anywhere: tests/gpu/check.sh
#
#  0. builds with CUDA (configure --with-cuda --with-cuda-arch=$CUDA_ARCH,
#     default 90) in $BUILD_DIR (default /tmp/esmbatch-gpu), or in the
#     source tree when that is already configured there; a checkout without
#     configure is built from an esmbatch-*.tar.gz (`make dist`) in its root,
#     else after autoreconf;
#  1. tests/test_cuda_ops: every backend op on CUDA against the CPU backend,
#     random inputs of awkward shapes, an NMSE bound per op (fp32; the GEMMs
#     also with bf16 and fp16 inputs, and bf16 weight operands);
#  2. folds every sequence of both fixtures on the GPU with --precision fp32
#     and --dump-tensors; tools/check_dump.py holds every dumped tensor to
#     the fixtures' tolerance (as tests/test_fold.sh does on the CPU).  The
#     same with --precision bf16 is reported, not held: how many tensors
#     leave the fp32 tolerance, the worst ratio, the atom37 deviation;
#  3. random weights (tools/mkweights, bf16 on disk) of the full esmfold_v1
#     dimensions (tests/data/manifest_esmfold_v1.json), then `esmbatch
#     calibrate` at $CALIB_LENGTHS (default 256,...,1344): its table,
#     predicted against measured;
#  4. with those weights, full-size folds at $LENGTHS (default 256 512 1024)
#     after a 32-residue warm-up: seconds, residues/s, device memory used
#     (driver total - free: context and weights included) and the share of
#     $PEAK_TFLOPS (default 790: an H200's dense bf16) achieved; and where
#     python3 has torch + transformers, the same FASTA through
#     EsmForProteinFolding (tests/gpu/torch_ref.py: random init from the
#     same config, run as published: the language model in fp16, the rest
#     fp32) on the same device, as published and with set_chunk_size(64),
#     side by side: seconds and the process's device memory as the driver
#     sees it (the same kind of figure as esmbatch's).  esmbatch runs at
#     its default precision (bf16 on a card), then once more at fp32
#     (reported beside it; the ratios are the default's).
#
# FLOPs of one fold, 2 per multiply-add, matrix products only (computed by
# bench/esmfold_ref.py count_flops, where that file is present), with
# T = L + 2, ESM-2 width D, ffn F, n layers; trunk widths c_s, c_z, heads
# h_s = c_s / 32, h_z = c_z / 32; P passes (max_recycles):
#   ESM-2 (once)      n (8 T D^2 + 4 T^2 D + 4 T D F)
#   per block         2 L^2 c_z h_s + 26 L c_s^2 + 4 L^2 c_s + 2 L c_s c_z
#                     + 62 L^2 c_z^2 + 4 L^2 c_z h_z + 12 L^3 c_z
#   per pass          blocks x block + the structure module's L^2 terms
#   total             ESM-2 + P x per pass + the pair heads 4 L^2 c_z 64
# i.e. for esmfold_v1 at L = 1024 about 5.4e14 (0.7 s at 790 TFLOP/s).
#
# The steps share a budget of $BUDGET seconds (default 570): each runs
# under a timeout that leaves the later steps their share, and a step that
# no longer fits is skipped and said so.  Held checks: the build, steps 1
# and 2 (fp32), and that steps 3 and 4 run; the speed and memory targets
# (3x faster, half the memory of the PyTorch reference) are reported.
#
# DEVICE=cpu runs steps 2-4 on the CPU backend (step 1 and bf16 skipped):
# a dry run of the script itself, e.g. with MODEL=tests/data/tiny_a/config.json
# LENGTHS="40 60" CALIB_LENGTHS=40,60 on a host without a GPU.
#
# Exit status: 0 all held checks passed, 77 no GPU (nothing checked), else 1.
set -uo pipefail

srcdir=$(cd "$(dirname "$0")/../.." && pwd)
here=$srcdir   # the checkout: its tests/gpu/torch_ref.py and bench/ (srcdir may become a tarball's)
arch=${CUDA_ARCH:-90}
budget=${BUDGET:-570}
device=${DEVICE:-cuda}
lengths=${LENGTHS:-256 512 1024}
calib_lengths=${CALIB_LENGTHS:-256,512,768,1024,1344}
peak=${PEAK_TFLOPS:-790}
model=${MODEL:-$srcdir/tests/data/manifest_esmfold_v1.json}
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
jobs=$(nproc 2>/dev/null || echo 4)
t_start=$(date +%s)
fail=0
summary=()

say() { printf '== %s\n' "$*"; }
# a line for the summary (printed now too); bad: one that fails the run
note() { summary+=("$*"); printf '   %s\n' "$*"; }
bad() { note "FAIL: $*"; fail=1; }
left() { echo $(( budget - ($(date +%s) - t_start) )); }
# how a step ended: "exit N", or "out of time" (timeout's 124)
ended() { if [ "$1" -eq 124 ]; then echo "out of time"; else echo "exit $1"; fi; }
# run "$@" under a timeout that leaves $1 seconds of the budget to the later
# steps; 124 without running when less than 10 s would be left for it
within() {
	local t=$(( $(left) - $1 ))
	shift
	[ "$t" -ge 10 ] || return 124
	timeout "$t" "$@"
}
finish() {
	printf '\n== summary (%d s)\n' $(( $(date +%s) - t_start ))
	printf '%s\n' "${summary[@]}"
	if [ "$1" -eq 0 ]; then echo "check.sh: all held checks passed"; fi
	exit "$1"
}

if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi -L || true
else
	say "nvidia-smi not found (the test program decides whether a GPU is present)"
fi

# --- 0. build ---
# A tree without configure (a git checkout) is built from a `make dist`
# tarball beside it when there is one, else after autoreconf.
if [ ! -x "$srcdir/configure" ]; then
	tarball=$(find "$srcdir" -maxdepth 1 -name 'esmbatch-*.tar.gz' | sort | tail -1)
	if [ -n "$tarball" ]; then
		say "building from $tarball"
		if ! { mkdir -p /tmp/esmbatch-gpu-src &&
		       tar -xzf "$tarball" -C /tmp/esmbatch-gpu-src --strip-components=1; }; then
			echo "check.sh: cannot unpack $tarball"; exit 1
		fi
		srcdir=/tmp/esmbatch-gpu-src
	else
		say "autoreconf"
		(cd "$srcdir" && autoreconf -fi) || { echo "check.sh: autoreconf failed"; exit 1; }
	fi
fi
if [ -f "$srcdir/config.status" ]; then
	build=$srcdir
else
	build=${BUILD_DIR:-/tmp/esmbatch-gpu}
fi
mkdir -p "$build" && cd "$build" || exit 1
if ! grep -q '^D\["HAVE_CUDA"\]' config.status 2>/dev/null ||
   ! grep -q "arch=compute_$arch" config.status 2>/dev/null; then
	say "configure --with-cuda --with-cuda-arch=$arch in $build"
	"$srcdir/configure" --with-cuda --with-cuda-arch="$arch" >configure.out 2>&1 ||
		{ tail -30 configure.out; echo "check.sh: configure failed"; exit 1; }
fi
say "make -j$jobs"
t0=$(date +%s)
if ! { make -j"$jobs" >make.out 2>&1 && make -j"$jobs" check TESTS= >>make.out 2>&1; }; then
	tail -40 make.out; echo "check.sh: build failed"; exit 1
fi
note "built in $(( $(date +%s) - t0 )) s: $(./esmbatch version | head -1)"
work=$build/gpu-check
rm -rf "$work" && mkdir -p "$work" || exit 1

# --- 1. every op, CUDA against CPU ---
if [ "$device" = cpu ]; then
	note "1. ops: skipped (DEVICE=cpu)"
else
	say "1. tests/test_cuda_ops"
	within 300 ./tests/test_cuda_ops > "$work/ops.out" 2>&1
	rc=$?
	cat "$work/ops.out"
	if [ $rc -eq 77 ]; then
		note "no CUDA device: nothing checked"
		finish 77
	fi
	if [ $rc -eq 0 ]; then
		note "1. ops: $(grep -c 'nmse' "$work/ops.out") cases within their NMSE bounds"
	else
		bad "1. ops: test_cuda_ops $(ended $rc): $(grep -E 'FAILED|ERROR' "$work/ops.out" | head -3 | tr '\n' ' ')"
	fi
fi

# --- 2. both fixtures against the golden tolerance ---
say "2. fixtures on $device"
for fx in tiny_a tiny_b; do
	d=$srcdir/tests/data/$fx
	# the fixture README: lower-case letters are fed as X
	awk '/^>/ { print; next } { gsub(/[a-z]/, "X"); print }' "$d/sequences.fa" > "$work/$fx.fa"
	for prec in fp32 bf16; do
		if [ "$device" = cpu ] && [ $prec = bf16 ]; then
			note "2. $fx bf16: skipped (the CPU computes in fp32 only)"
			continue
		fi
		out=$work/$fx.$prec
		t0=$(date +%s%N)
		within 280 ./esmbatch -q -i "$work/$fx.fa" -o "$out" --weights "$d/weights.safetensors" \
			--devices "$device" --precision $prec --dump-tensors "$out.dump" 2> "$out.err"
		rc=$?
		ms=$(( ($(date +%s%N) - t0) / 1000000 ))
		if [ $rc -ne 0 ]; then
			bad "2. $fx $prec: esmbatch $(ended $rc): $(head -2 "$out.err" | tr '\n' ' ')"
			continue
		fi
		python3 "$srcdir/tools/check_dump.py" "$out.dump" "$d" > "$out.check"
		crc=$?
		# check_dump.py: SEQ TENSOR max diff D tol T ratio R ok|FAIL
		stats=$(awk '$3 == "max" && $4 == "diff" {
				n++; if ($10 != "ok") over++
				if ($9 + 0 > worst) { worst = $9 + 0; at = $1 "/" $2 }
				if ($2 == "atom37_positions" && $5 + 0 > atom) atom = $5 + 0 }
			END { printf "%d of %d tensors over the tolerance, worst ratio %.3f (%s), atom37 max |d| %.3g A",
			      over, n, worst, at, atom }' "$out.check")
		if [ $prec = bf16 ]; then
			note "2. $fx bf16 (reported): $stats; $ms ms"
		elif [ $crc -eq 0 ]; then
			note "2. $fx fp32: $stats; $ms ms"
		else
			bad "2. $fx fp32: $stats; $(grep -E 'FAIL|MISSING' "$out.check" | head -3 | tr '\n' ' ')"
		fi
	done
done

# --- 3. full-size random weights, calibrate ---
say "3. random weights of $(basename "$model"), calibrate at $calib_lengths"
wdir=$work/full
weights=$wdir/weights.safetensors
mkdir -p "$wdir" "$work/hf" || exit 1
# the HF config of the model, for bench/esmfold_ref.py flops
python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
json.dump(c["config"] if "config" in c and "tensors" in c else c, open(sys.argv[2], "w"))' \
	"$model" "$work/hf/config.json" || bad "3. cannot read $model"
t0=$(date +%s)
if within 200 ./tools/mkweights --config "$model" -o "$weights" --dtype bf16 > "$work/mkweights.out" 2>&1; then
	note "3. random weights: $(du -h "$weights" | cut -f1) in $(( $(date +%s) - t0 )) s"
else
	bad "3. mkweights failed or out of time: $(tail -2 "$work/mkweights.out" | tr '\n' ' ')"
	rm -f "$weights"
fi
if [ -s "$weights" ]; then
	t0=$(date +%s)
	within 120 ./esmbatch calibrate -q --weights "$weights" --devices "$device" \
		--lengths "$calib_lengths" -o "$work/quota.tsv" > "$work/calib.out" 2> "$work/calib.err"
	rc=$?
	if [ $rc -eq 0 ]; then
		note "3. calibrate in $(( $(date +%s) - t0 )) s, precision $(head -1 "$work/quota.tsv" |
			tr '\t' '\n' | sed -n 's/^precision=//p'), bytes:"
	else   # the rows done so far are printed all the same
		bad "3. calibrate $(ended $rc) after $(( $(date +%s) - t0 )) s: $(tail -2 "$work/calib.err" | tr '\n' ' ')"
	fi
	while IFS= read -r line; do note "   $line"; done < <(expand -t 13 "$work/calib.out")
else
	note "3. calibrate: skipped (no weights)"
fi

# --- 4. timed full-size folds, and the PyTorch reference ---
say "4. folds at $lengths"
fa=$work/lengths.fa
# one random sequence per length (awk's own generator, seeded), after a warm-up
awk -v lens="32 $lengths" 'BEGIN {
	srand(7); aa = "ACDEFGHIKLMNPQRSTVWY"; n = split(lens, L, " ")
	for (i = 1; i <= n; i++) {
		s = ""; for (k = 0; k < L[i]; k++) s = s substr(aa, int(rand() * 20) + 1, 1)
		printf ">%s\n%s\n", i == 1 ? "warmup" : "len" L[i], s
	} }' > "$fa"
if [ -s "$weights" ]; then
	t0=$(date +%s)
	within 110 ./esmbatch -q -i "$fa" -o "$work/fold" --weights "$weights" --devices "$device" \
		2> "$work/fold.err"
	rc=$?
	[ $rc -eq 0 ] || bad "4. esmbatch $(ended $rc) after $(( $(date +%s) - t0 )) s: $(tail -2 "$work/fold.err" | tr '\n' ' ')"
	# the same at fp32 (reported; the CPU computes in fp32 only)
	if [ "$device" != cpu ]; then
		t0=$(date +%s)
		within 70 ./esmbatch -q -i "$fa" -o "$work/fold32" --weights "$weights" \
			--devices "$device" --precision fp32 2> "$work/fold32.err"
		rc=$?
		[ $rc -eq 0 ] || note "4. esmbatch fp32 $(ended $rc) after $(( $(date +%s) - t0 )) s: $(tail -1 "$work/fold32.err")"
	fi
else
	note "4. esmbatch folds: skipped (no weights)"
fi
: > "$work/flops"
if [ -f "$here/bench/esmfold_ref.py" ]; then
	for L in $lengths; do
		printf '%s\t%s\n' "$L" "$(python3 "$here/bench/esmfold_ref.py" flops "$work/hf" "$L")" >> "$work/flops"
	done
fi
: > "$work/torch.jsonl"
if python3 -c 'import torch, transformers' 2>/dev/null; then
	# as published (fp16 language model), then with the low-memory
	# set_chunk_size(64) its users are told to use (the last 60 s its own)
	for chunk in 0 64; do
		[ $chunk -eq 0 ] && keep=60 || keep=5
		t0=$(date +%s)
		within $keep python3 "$here/tests/gpu/torch_ref.py" "$model" "$fa" "$device" $chunk \
			>> "$work/torch.jsonl" 2> "$work/torch.err"
		rc=$?
		[ $rc -eq 0 ] || note "4. PyTorch reference (chunk $chunk): $(ended $rc) after $(( $(date +%s) - t0 )) s: $(tail -1 "$work/torch.err")"
	done
else
	note "4. PyTorch reference: skipped (python3 has no torch + transformers)"
fi
# the table: esmbatch's summary.tsv (columns by name; the rows written so far
# when it was stopped), the FLOPs, torch's lines
while IFS= read -r line; do note "$line"; done < <(python3 - "$work/fold/summary.tsv" "$work/flops" \
	"$work/torch.jsonl" "$peak" "$device" "$work/fold32/summary.tsv" <<'EOF'
import csv, glob, json, sys
summ, flops_path, torch_path, peak, device, summ32 = sys.argv[1:7]
def rows(summ):
    # the whole table, else the rows a stopped run had written (summary.tsv.tmp.PID)
    for path in [summ] + sorted(glob.glob(summ + ".tmp*")):
        try:
            return {r["name"]: r for r in csv.DictReader(open(path), delimiter="\t")}
        except OSError:
            pass
    return {}
eng, eng32 = rows(summ), rows(summ32)
flops = dict(l.split("\t") for l in open(flops_path).read().split("\n") if l)
ref = {0: {}, 64: {}}   # chunk -> name -> line
for l in open(torch_path):
    r = json.loads(l)
    ref.setdefault(r.get("chunk", 0), {})[r.get("name")] = r
gib = lambda b: "%.1f" % (float(b) / 2**30) if b not in (None, "", "-") and float(b) >= 0 else "-"
# PyTorch's memory is the same kind of figure as esmbatch's: the process's
# device memory as the driver sees it (context included); reserved where
# that is missing
def refcols(t, s, used, ok):
    ts = t.get("seconds")
    ru = t.get("device_used", t.get("reserved"))
    return ("%.2f" % ts if ts else t.get("error", "-")[:20],
            gib(ru),
            "%.2f" % (ts / s) if s and ts else "-",
            "%.2f" % (float(used) / ru) if ok and ru and used not in (None, "-") and float(used) > 0 else "-")
hdr = "%-6s %8s %8s %10s %9s %7s | %8s %9s | %9s %9s %7s %7s | %9s %9s %7s %7s"
print("4. " + hdr % ("L", "esmbatch", "res/s", "dev used", "TFLOP/s", "of peak", "fp32", "dev used",
                     "PyTorch", "dev used", "faster", "memory", "chunk 64", "dev used", "faster", "memory"))
print("   " + hdr % ("", "s", "", "GiB", "", "%", "s", "GiB", "s", "GiB", "x", "x", "s", "GiB", "x", "x"))
for name, r in eng.items():
    if name == "warmup":
        continue
    L = r.get("length", "-")
    ok = r.get("status") == "ok"
    s = float(r["seconds"]) if ok else None
    f = float(flops[L]) if L in flops else None
    used = r.get("device_used_bytes")
    row = ("%.2f" % s if s else r.get("status", "-"),
           "%.0f" % (int(L) / s) if s else "-",
           gib(used) if ok else "-",
           "%.1f" % (f / s / 1e12) if s and f else "-",
           "%.1f" % (100 * f / s / 1e12 / float(peak)) if s and f else "-")
    r32 = eng32.get(name, {})
    row += (r32["seconds"] if r32.get("status") == "ok" else r32.get("status", "-"),
            gib(r32.get("device_used_bytes")) if r32.get("status") == "ok" else "-")
    row += refcols(ref[0].get(name, {}), s, used, ok) + refcols(ref[64].get(name, {}), s, used, ok)
    print("   " + hdr % ((L,) + row))
if "(model built)" in ref[0]:
    print("   PyTorch model built in %.1f s (random init on %s)" % (ref[0]["(model built)"]["seconds"], device))
print("   targets: faster >= 4 x and memory <= 0.5 x the published setting at every length (reported,"
      " not held); memory = the process's device memory as the driver sees it (total - free:"
      " context, weights, arenas) on both sides")
EOF
)

[ $fail -eq 0 ] && finish 0
echo "check.sh: FAILED"
finish 1
