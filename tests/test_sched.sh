#!/usr/bin/env bash
# test_sched.sh - the scheduler with the demo model on simulated devices:
# a mix of lengths over two sim devices of different sizes, two workers
# each: at no moment do the quotas running on a device exceed its budget
# (checked from run.jsonl), every record has one row in input order, a
# record too long for both is split and every fragment written
# (NAME.partIofN.pdb, the record's numbering, a FRAGMENT remark), --no-split
# makes such records failed (exit 3); an injected out-of-memory event
# (ESMBATCH_FAULT=oom:N) leaves every other output identical to a clean run;
# `plan` keeps every device within its budget and orders work longest first.
. "${srcdir:-.}/tests/lib.sh"
w=$demo

mkfa 3 "$tmp/mix.fa" r0=30 r1=120 r2=45 r3=200 r4=60 r5=15 r6=90 r7=8
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
grep -q 'REMARK 250 FRAGMENT SEQUENCE 1-' "$tmp/small/r3.part1of"*.pdb || fail "no FRAGMENT remark"
[ "$(awk -F'\t' '$2 == "r3" { print $6 }' "$tmp/small/summary.tsv")" = split ] || fail "r3 not marked split"
ls "$tmp/small" | grep -q frag && fail "unrenamed fragment files left"

# multimers whose halving point lands on the ':' (100:100) or just after
# it (99:101): split at the chain boundary, no fragment begins or ends
# with the linker, every fragment written
mkfa 5 "$tmp/dimer.fa" d1=100:100 d2=99:101
"$bin" -q -i "$tmp/dimer.fa" -o "$tmp/dimer" --weights "$w" --num-recycles 0 \
	--devices sim:3M,sim:2500K || fail "dimer run exited $?"
python3 - "$tmp/dimer" <<'PY' || fail "dimer halved on its linker"
import os, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1] + "/summary.tsv")][1:]
colon = {"d1": 101, "d2": 100}   # 1-based character of the ':'
for r in rows:
    if r[5] != "split":
        sys.exit("%s: %s %s" % (r[1], r[5], r[6]))
    for rg in r[6].split(" ")[-1].split(","):
        a, b = map(int, rg.split("-"))
        if a == colon[r[1]] or b == colon[r[1]]:
            sys.exit("%s: fragment %s begins or ends with the linker" % (r[1], rg))
    for f in r[2].split(","):
        if os.path.getsize(os.path.join(sys.argv[1], f)) == 0:
            sys.exit("%s: %s empty" % (r[1], f))
PY

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

# the plan without folding: per device within its budget, every record
# in the order of work, the longest first on each device, the arenas its
# workers keep counted in its peak
"$bin" plan -q -i "$tmp/mix.fa" --weights "$w" --num-recycles 0 --devices sim:12M,sim:8M \
	--workers 2 >"$tmp/plan.tsv" || fail "plan exited $?"
python3 - "$tmp/plan.tsv" <<'PY' || fail "plan: bad tables"
import sys
tables = [[l.split("\t") for l in t.strip().split("\n")] for t in open(sys.argv[1]).read().split("\n\n")]
assert len(tables) == 4, len(tables)
dev = {r[0]: r for r in tables[1][1:]}
for name, budget, workers, peak, kept in dev.values():
    assert int(peak) <= int(budget), (name, peak, budget)
    # a card's workers keep their arenas: held at the end, within the peak
    assert 0 < int(kept) <= int(peak), (name, kept, peak)
for r in tables[2][1:]:
    assert int(r[6]) <= int(dev[r[0]][1]) and int(r[5]) >= 1, r
order = tables[3][1:]
assert sorted(int(r[3]) for r in order) == list(range(8)), order
for d in dev:   # the longest of a device's records starts first on it
    lens = [int(r[4].split("-")[1]) for r in order if r[1] == d]
    assert not lens or lens[0] == max(lens), (d, lens)
PY
# --workers auto (the default): budget / the largest quota of the commonest
# bucket, at most 4 on a card (sim), 1 on the CPU; --workers N forces N
wk() { "$bin" plan -q -i "$tmp/mix.fa" --weights "$w" --num-recycles 0 "$@" |
	awk -F'\t' '$1=="device"&&$3=="workers"{t=1;next} t&&NF==5{printf "%s=%s ", $1, $3} NF<2{t=0}'; }
[ "$(wk --devices sim:40M,sim:24M,sim:3M)" = "sim:40M=4 sim:24M=2 sim:3M=1 " ] ||
	fail "auto workers: $(wk --devices sim:40M,sim:24M,sim:3M)"
[ "$(wk --devices sim:40M --workers auto)" = "sim:40M=4 " ] || fail "--workers auto"
[ "$(wk --devices sim:40M --workers 3)" = "sim:40M=3 " ] || fail "--workers 3 not forced"
[ "$(wk --devices cpu)" = "cpu=1 " ] || fail "auto workers on the CPU: not 1"
"$bin" plan -q -i "$tmp/mix.fa" --cpu-memory 12Q >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad --cpu-memory: expected exit 2"
"$bin" plan -q -i "$tmp/mix.fa" --weights "$w" --devices cpu --cpu-memory 1K >"$tmp/plan1k.tsv" ||
	fail "plan --cpu-memory 1K exited $?"
grep -q $'^cpu\t0\t1\t0\t0$' "$tmp/plan1k.tsv" || fail "--cpu-memory 1K: budget not 0"

# esmfold_v1 (its manifest) planned on a sim:32G card: the weights take
# 13.1 GiB at fp32 (3.5 B parameters) and 6.6 GiB at bf16 (Linear matrices
# in bf16, the rest fp32), the budget the rest of the card; at auto as a
# card chooses, bf16
for p in fp32:13.0:13.2 bf16:6.5:6.7 auto:6.5:6.7; do
	IFS=: read prec lo hi <<<"$p"
	b=$("$bin" plan -q -i "$tmp/mix.fa" --weights "$srcdir/tests/data/manifest_esmfold_v1.json" \
		--devices sim:32G --precision $prec | awk -F'\t' '$1 == "sim:32G" && NF == 5 { print $2; exit }')
	awk -v b="$b" -v lo=$lo -v hi=$hi 'BEGIN { wt = (32 * 2^30 - b) / 2^30; exit !(wt >= lo && wt <= hi) }' ||
		fail "esmfold_v1 on sim:32G at $prec: budget $b, not 32 GiB less $lo-$hi GiB of weights"
done
# a sim card at bf16 holds its weights in bf16: more budget, every record folded
run -o "$tmp/bf16" --devices sim:12M --precision bf16 --workers 1 || fail "sim bf16 run exited $?"
[ "$(tail -n +2 "$tmp/bf16/summary.tsv" | cut -f6 | sort -u)" = ok ] || fail "sim bf16: not all ok"
run -o "$tmp/fp32" --devices sim:12M --precision fp32 --workers 1 || fail "sim fp32 run exited $?"
python3 - "$tmp/fp32/run.jsonl" "$tmp/bf16/run.jsonl" <<'PY' || fail "sim bf16: weights not smaller"
import json, sys
b = [next(e["budget"] for e in map(json.loads, open(f)) if e["event"] == "device") for f in sys.argv[1:]]
assert b[1] > b[0], b
PY

# the input is checked before the weights are loaded
"$bin" -q -i "$tmp/none.fa" -o "$tmp/none" --weights "$tmp/none.safetensors" 2>"$tmp/none.err"
[ $? -eq 1 ] || fail "missing input: expected exit 1"
grep -q none.fa "$tmp/none.err" && ! grep -q none.safetensors "$tmp/none.err" ||
	fail "missing input: not reported before the weights"

finish
