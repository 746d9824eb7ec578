#!/usr/bin/env bash
# test_sched_emu.sh - the scheduler over emulated CUDA devices
# (tests/esmbatch-cuemu, demo model, --num-recycles 0):
#  1. two devices of different sizes (CUEMU_MEM=128M,120M): each budget comes
#     from the device (below its size), every record has one row, ok or split;
#  2. one device, the worker's arena refused (CUEMU_FAIL_MALLOC, its
#     number read from a traced clean run) as the first record reserves it:
#     that record is retried smaller, exit 0, every other PDB
#     byte-identical to the clean run;
#  3. one device, a sticky launch failure (CUEMU_FAIL_LAUNCH) in the third
#     record: exit 3, a row for every record in summary.partial.tsv (the
#     records not run have no final outcome: no summary.tsv), the two
#     records folded before it byte-identical to the clean run, the device
#     retired in one line, the records not yet folded failed with the
#     reason (no device left);
#  4. two devices, a sticky launch failure on the second one's first record
#     (CUEMU_FAIL_LAUNCH=N@1): the device is retired in one line, its record
#     goes back and every record is folded on the other, exit 0, every PDB
#     byte-identical to the clean run; the same when the error is
#     cudaErrorUnknown (CUEMU_FAIL_ERROR=999, a dead virtualised context);
#  6. (the clean run) the worker's arena is reserved once for its five
#     folds (the longest first) and released once, when the worker ends:
#     one cudaMalloc after the worker's workspace, one cudaFree before it
#     (no cudaMalloc or cudaFree per fold; the gather indices live in the
#     workspace, counted in every quota); and the kernels' shared memory
#     limits set when the device starts, each kernel once, before any
#     launch (cudaFuncSetAttribute never beside other threads' launches);
#  5. two devices of compute capability 3.0 (no build has it) and 12.0 (runs
#     the PTX), every device by default: the first is refused in one line
#     naming it and the configure option, every record folded on the other,
#     exit 0; one device of 3.0 alone: exit 1.
. "${srcdir:-.}/tests/lib.sh"
bin=${ESMBATCH_CUEMU:-./tests/esmbatch-cuemu}
w=$demo
export MALLOC_PERTURB_=165

python3 - "$tmp/mix.fa" <<'PY'
import random, sys
random.seed(5)
with open(sys.argv[1], "w") as f:
    for i, L in enumerate([20, 70, 12, 35, 8]):
        f.write(">s%d\n%s\n" % (i, "".join(random.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(L))))
PY
run() { "$bin" -q -i "$tmp/mix.fa" --weights "$w" --num-recycles 0 --workers 1 "$@"; }
rows() { tail -n +2 "$1/summary.tsv" | cut -f2,6 | tr '\t\n' ': '; }

# 1. two devices, budgets from the devices
CUEMU_DEVICES=2 CUEMU_MEM=128M,120M run -o "$tmp/two" --devices cuda:0,cuda:1 2> "$tmp/two.err" ||
	fail "two devices: exit $?"
python3 - "$tmp/two/run.jsonl" <<'PY' || fail "two devices: budgets not from the devices"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
b = {e["device"]: e["budget"] for e in ev if e["event"] == "device"}
assert 0 < b["cuda:0"] < 128 << 20 and 0 < b["cuda:1"] < 120 << 20 and b["cuda:1"] < b["cuda:0"], b
PY
[ "$(tail -n +2 "$tmp/two/summary.tsv" | cut -f6 | grep -cvE '^(ok|split)$')" -eq 0 ] ||
	fail "two devices: $(rows "$tmp/two")"

# the clean run on one device, traced
export CUEMU_DEVICES=1 CUEMU_MEM=128M
CUEMU_TRACE=1 run -o "$tmp/clean" --devices cuda:0 2> "$tmp/clean.err" || fail "clean: exit $?"
# the worker's cuBLAS workspace: the largest cudaMalloc of the trace
ws=$(awk '$2 == "cudaMalloc" && $4 > m { m = $4 } END { print m }' "$tmp/clean.err")
# 6. after the worker's workspace (the last of the largest), its arena
# only, and it is released only when the worker ends (before its workspace)
nfold=$(grep -c '"event":"fold"' "$tmp/clean/run.jsonl")
extra=$(awk -v ws="$ws" '$2 == "cudaMalloc" { n++; if ($4 == ws) n = 0 } END { print n }' "$tmp/clean.err")
freed=$(awk -v ws="$ws" '$2 == "cudaMalloc" && $4 == ws { n = 0; on = 1 }
	$2 == "cudaFree:" && on { if ($3 == ws) exit; n++ } END { print n + 0 }' "$tmp/clean.err")
[ "$nfold" -eq 5 ] && [ "$extra" -eq 1 ] && [ "$freed" -eq 1 ] ||
	fail "$extra cudaMalloc and $freed cudaFree for the arenas of $nfold folds on one worker, expected 1 and 1"
read -r nattr late twice < <(awk '$2 == "launch" { launched = 1 }
	$2 == "cudaFuncSetAttribute" { n++; late += launched; twice += seen[$3 " " $NF]++ > 0 }
	END { print n + 0, late + 0, twice + 0 }' "$tmp/clean.err")
[ "$nattr" -gt 0 ] && [ "$late" -eq 0 ] && [ "$twice" -eq 0 ] ||
	fail "cudaFuncSetAttribute: $nattr calls, $late after the first launch, $twice for a kernel again; expected some, 0, 0"
# the arena's cudaMalloc number; the launch number 10 into the third fold
# (each fold makes as many k_gather launches: the third's first starts it)
nmalloc=$(awk -v ws="$ws" '$2 == "cudaMalloc" { sub(":", "", $3); if (after) n = $3; after = $4 == ws }
	END { print n }' "$tmp/clean.err")
gathers=$(awk '$2 == "launch" && $4 == "k_gather" { n++ } END { print n }' "$tmp/clean.err")
nlaunch=$(awk -v g=$((gathers / nfold)) '$2 == "launch" && $4 == "k_gather" && ++n == 2 * g + 1 {
	sub(":", "", $3); print $3 + 10; exit }' "$tmp/clean.err")

# 2. the worker's arena refused
CUEMU_FAIL_MALLOC=$nmalloc run -o "$tmp/oom" --devices cuda:0 2> "$tmp/oom.err" ||
	fail "refused cudaMalloc $nmalloc: exit $?"
grep -q 'retrying smaller' "$tmp/oom.err" || fail "refused cudaMalloc $nmalloc: no retry"
[ "$(rows "$tmp/oom")" = "$(rows "$tmp/clean")" ] || fail "refused cudaMalloc: $(rows "$tmp/oom")"
retried=$(grep -o '"record":[0-9]*[^}]*"status":"oom"' "$tmp/oom/run.jsonl" | head -1 | cut -d: -f2 | cut -d, -f1)
for p in "$tmp"/clean/*.pdb; do
	n=$(basename "$p")
	[ "$n" = "s$retried.pdb" ] && continue
	cmp -s "$p" "$tmp/oom/$n" || fail "refused cudaMalloc: $n differs from the clean run"
done

# 3. a sticky launch failure in the third record
CUEMU_FAIL_LAUNCH=$nlaunch run -o "$tmp/sticky" --devices cuda:0 2> "$tmp/sticky.err"
rc=$?
[ $rc -eq 3 ] || fail "sticky launch failure $nlaunch: exit $rc, expected 3"
[ "$(tail -n +2 "$tmp/sticky/summary.partial.tsv" | wc -l)" -eq 5 ] || fail "sticky: rows missing"
[ -e "$tmp/sticky/summary.tsv" ] && fail "sticky: summary.tsv written with records not run"
nok=0
for p in "$tmp"/sticky/*.pdb; do
	[ -e "$p" ] || continue
	cmp -s "$p" "$tmp/clean/$(basename "$p")" || fail "sticky: $(basename "$p") differs from the clean run"
	nok=$((nok + 1))
done
[ $nok -ge 2 ] || fail "sticky: $nok records folded before the failure, expected 2"
[ "$(grep -c 'retired' "$tmp/sticky.err")" -eq 1 ] || fail "sticky: not one line retiring the device"
grep -q 'no device left' "$tmp/sticky/summary.partial.tsv" || fail "sticky: no reason in the summary"
grep -qi 'out of memory\|retrying smaller' "$tmp/sticky.err" && fail "sticky: treated as out of memory"

# 4. two devices, a sticky launch failure on the second one's first record
CUEMU_DEVICES=2 CUEMU_MEM=128M,120M CUEMU_FAIL_LAUNCH=100@1 run -o "$tmp/lost" --devices cuda:0,cuda:1 \
	2> "$tmp/lost.err"
rc=$?
[ $rc -eq 0 ] || fail "device lost: exit $rc, expected 0"
[ "$(grep -c 'retired' "$tmp/lost.err")" -eq 1 ] || fail "device lost: not one line retiring cuda:1"
grep -qi 'out of memory\|retrying smaller' "$tmp/lost.err" && fail "device lost: treated as out of memory"
grep -q '"device":"cuda:1".*"status":"lost"' "$tmp/lost/run.jsonl" || fail "device lost: no lost fold on cuda:1"
[ "$(grep '"status":"ok"' "$tmp/lost/run.jsonl" | grep -c '"device":"cuda:1"')" -eq 0 ] ||
	fail "device lost: cuda:1 folded after its loss"
[ "$(tail -n +2 "$tmp/lost/summary.tsv" | cut -f6 | grep -cvx ok)" -eq 0 ] || fail "device lost: $(rows "$tmp/lost")"
for p in "$tmp"/clean/*.pdb; do
	cmp -s "$p" "$tmp/lost/$(basename "$p")" || fail "device lost: $(basename "$p") differs from the clean run"
done
# ... by cudaErrorUnknown
CUEMU_DEVICES=2 CUEMU_MEM=128M,120M CUEMU_FAIL_LAUNCH=100@1 CUEMU_FAIL_ERROR=999 run -o "$tmp/lost999" \
	--devices cuda:0,cuda:1 2> "$tmp/lost999.err"
rc=$?
[ $rc -eq 0 ] || fail "device lost (999): exit $rc, expected 0"
[ "$(grep -c 'retired' "$tmp/lost999.err")" -eq 1 ] || fail "device lost (999): not one line retiring cuda:1"
[ "$(tail -n +2 "$tmp/lost999/summary.tsv" | cut -f6 | grep -cvx ok)" -eq 0 ] ||
	fail "device lost (999): $(rows "$tmp/lost999")"

# 5. a device the binary cannot run
CUEMU_DEVICES=2 CUEMU_CC=30,120 run -o "$tmp/cc" 2> "$tmp/cc.err"
rc=$?
[ $rc -eq 0 ] || fail "compute capability 3.0 beside 12.0: exit $rc, expected 0"
[ "$(grep -c 'refused' "$tmp/cc.err")" -eq 1 ] &&
	grep 'refused' "$tmp/cc.err" | grep 'cuda:0' | grep -q -- '--with-cuda-arch=.*30' ||
	fail "compute capability 3.0: not one line naming cuda:0 and what to rebuild with"
[ "$(tail -n +2 "$tmp/cc/summary.tsv" | cut -f6 | grep -cvx ok)" -eq 0 ] || fail "cc: $(rows "$tmp/cc")"
grep -q '"device":"cuda:0"' "$tmp/cc/run.jsonl" && fail "cc: the refused device is in the run"
CUEMU_DEVICES=1 CUEMU_CC=30 run -o "$tmp/cc1" --devices cuda:0 2> "$tmp/cc1.err"
rc=$?
[ $rc -eq 1 ] || fail "compute capability 3.0 alone: exit $rc, expected 1"

finish
