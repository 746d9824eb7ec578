#!/usr/bin/env bash
# test_sched.sh - the scheduler with the demo model on simulated devices:
# a mix of lengths over two sim devices of different sizes, two workers
# each: at no moment do the quotas running on a device exceed its budget
# (checked from run.jsonl), every record has one row in input order, a
# record too long for both is split and every fragment written
# (NAME.partIofN.pdb, original numbering, a FRAGMENT remark), --no-split
# makes such records failed (exit 3); an injected out-of-memory event
# (ESMBATCH_FAULT=oom:N) leaves every other output identical to a clean run.
set -u
srcdir=${srcdir:-.}
bin=${ESMBATCH:-./esmbatch}
w=$srcdir/data/demo/esmfold_demo.safetensors
tmp=$(mktemp -d "${TMPDIR:-/tmp}/esmbatch-sched.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

python3 - "$tmp/mix.fa" <<'PY'
import random, sys
random.seed(3)
with open(sys.argv[1], "w") as f:
    for i, L in enumerate([30, 120, 45, 200, 60, 15, 90, 8]):
        f.write(">r%d\n%s\n" % (i, "".join(random.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(L))))
PY
run() { "$bin" -q -i "$tmp/mix.fa" --weights "$w" --num-recycles 0 "$@"; }

# budgets never exceeded; rows in input order
run -o "$tmp/big" --devices sim:12M,sim:8M --workers 2 || fail "sim run exited $?"
python3 - "$tmp/big/run.jsonl" <<'PY' || fail "a device's budget was exceeded"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
budget = {e["device"]: e["budget"] for e in ev if e["event"] == "device"}
folds = [e for e in ev if e["event"] == "fold"]
for f in folds:
    at = f["t0"]
    used = sum(g["quota"] for g in folds if g["device"] == f["device"] and g["t0"] <= at < g["t1"])
    if used > budget[f["device"]]:
        sys.exit("%s: %d > %d at %.3f" % (f["device"], used, budget[f["device"]], at))
PY
[ "$(tail -n +2 "$tmp/big/summary.tsv" | cut -f2 | tr '\n' ' ')" = "r0 r1 r2 r3 r4 r5 r6 r7 " ] ||
	fail "rows not in input order"
[ "$(tail -n +2 "$tmp/big/summary.tsv" | cut -f6 | sort -u)" = ok ] || fail "not all ok on big devices"

# small devices: long records are split, every fragment written
run -o "$tmp/small" --devices sim:3M,sim:2500K --workers 2 || fail "small sim run exited $?"
grep -q $'\tr3\tr3.part1of' "$tmp/small/summary.tsv" || fail "r3 not split"
for f in $(awk -F'\t' '$2 == "r3" { print $3 }' "$tmp/small/summary.tsv" | tr ',' ' '); do
	[ -s "$tmp/small/$f" ] || fail "fragment $f missing"
done
grep -q 'REMARK 250 FRAGMENT RESIDUES 1-' "$tmp/small/r3.part1of"*.pdb || fail "no FRAGMENT remark"
[ "$(awk -F'\t' '$2 == "r3" { print $6 }' "$tmp/small/summary.tsv")" = split ] || fail "r3 not marked split"
ls "$tmp/small" | grep -q frag && fail "unrenamed fragment files left"

# --no-split: failed, exit 3
run -o "$tmp/nosplit" --devices sim:3M,sim:2500K --no-split
[ $? -eq 3 ] || fail "--no-split: expected exit 3"
[ "$(awk -F'\t' '$2 == "r3" { print $6 }' "$tmp/nosplit/summary.tsv")" = failed ] || fail "--no-split: r3 not failed"
[ "$(tail -n +2 "$tmp/nosplit/summary.tsv" | wc -l)" -eq 8 ] || fail "--no-split: rows"

# an injected out-of-memory event: the others' outputs identical
run -o "$tmp/clean" --devices cpu || fail "clean run exited $?"
ESMBATCH_FAULT=oom:3 run -o "$tmp/fault" --devices cpu || fail "fault run exited $?"
grep -q '"status":"oom"' "$tmp/fault/run.jsonl" || fail "no oom event recorded"
oom=$(python3 -c "import json,sys
print([json.loads(l) for l in open(sys.argv[1]) if '\"oom\"' in l][0]['record'])" "$tmp/fault/run.jsonl")
for f in "$tmp/clean"/*.pdb; do
	n=$(basename "$f" .pdb)
	[ "$n" = "r$oom" ] && continue
	cmp -s "$f" "$tmp/fault/$n.pdb" || fail "$n.pdb differs after another job's OOM"
done
[ "$(tail -n +2 "$tmp/fault/summary.tsv" | cut -f6 | sort -u)" = ok ] || fail "fault run: not all ok"

echo "test_sched: $fails failure(s)"
[ "$fails" -eq 0 ]
