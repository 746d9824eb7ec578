#!/usr/bin/env bash
# test_output.sh - the output path of a record (demo model, CPU):
# - a slow file system (ESMBATCH_FAULT=slowio:MS) does not hold up the
#   workers: finishing a record happens on one writer, outside the lock
#   every worker shares, so every fold starts before the first record's
#   output step is over;
# - a record split into 32 parts with a 100-character name lists every
#   fragment in its file column, and a rerun skips it;
# - records named like another record's fragments (NAME.partIofN, or the
#   temporary NAME.fragA-B) get other names: no two rows share a file;
# - an output that cannot be written (a directory in the way of a PDB, as
#   a full disk would refuse it): the rest is written, summary.partial.tsv
#   (not summary.tsv: that record has no final outcome) has every row, the
#   log names the file, exit 1; once it can be written, the rerun folds
#   only that record and writes summary.tsv, the partial table removed;
# - a summary.tsv that cannot be replaced (a directory): refused at the
#   start, before any fold;
# - a second run into a directory a run is writing into exits 4 at once
#   with one line naming the lock; the first run is undisturbed, and a
#   killed run's temporaries are removed by the next.
. "${srcdir:-.}/tests/lib.sh"
w=$demo
run() { "$bin" -q --weights "$w" --num-recycles 0 "$@"; }

# --- the output step: one writer, no shared lock held --------------------
mkfa 11 "$tmp/four.fa" s0=20 s1=20 s2=20 s3=20
ESMBATCH_FAULT=slowio:1500 run -i "$tmp/four.fa" -o "$tmp/slow" --devices cpu --workers 2 ||
	fail "slowio: exited $?"
python3 - "$tmp/slow/run.jsonl" <<'PY' || fail "slowio: the workers waited for the output step"
import json, sys
folds = [e for e in map(json.loads, open(sys.argv[1])) if e["event"] == "fold"]
assert len(folds) == 4, folds
# The first record's output step begins when its fold ends and lasts at
# least the injected 1.5 s; every fold must start before it is over (an
# order of events, not a speed: a worker waiting for the step would start
# its next fold after it).
step_end = min(e["t1"] for e in folds) + 1.5
late = [e for e in folds if e["t0"] >= step_end]
assert not late, "folds started after the first output step: %r" % late
PY
[ "$(tail -n +2 "$tmp/slow/summary.tsv" | cut -f2,3,6 | tr '\t\n' ',,')" = \
  "s0,s0.pdb,ok,s1,s1.pdb,ok,s2,s2.pdb,ok,s3,s3.pdb,ok," ] || fail "slowio: summary rows"
[ "$(wc -l <"$tmp/slow/done.jsonl")" -eq 4 ] || fail "slowio: done.jsonl lines"

# --- 32 fragments of a 100-character name (the budget sized for fp32
# weights; a sim: card at auto holds bf16 ones, as a card does) -----------
long=$(printf 'L%.0s' $(seq 100))
mkfa 11 "$tmp/long.fa" "$long=320"
run -i "$tmp/long.fa" -o "$tmp/long" --devices sim:1850K --precision fp32 || fail "32 parts: exited $?"
files=$(awk -F'\t' 'NR == 2 { print $3 }' "$tmp/long/summary.tsv")
[ "$(awk -F'\t' 'NR == 2 { print $6 }' "$tmp/long/summary.tsv")" = split ] || fail "32 parts: not split"
[ "$(echo "$files" | tr ',' '\n' | wc -l)" -eq 32 ] ||
	fail "32 parts: the file column lists $(echo "$files" | tr ',' '\n' | wc -l)"
for i in $(seq 32); do
	echo ",$files," | grep -q ",$long.part${i}of32.pdb," || fail "32 parts: part $i not listed"
	[ -s "$tmp/long/$long.part${i}of32.pdb" ] || fail "32 parts: part $i not written"
done
run -i "$tmp/long.fa" -o "$tmp/long" --devices sim:1850K --precision fp32 || fail "32 parts rerun: exited $?"
grep -q '"event":"skip","record":0' "$tmp/long/run.jsonl" || fail "32 parts rerun: not skipped"
grep -q '"event":"fold"' "$tmp/long/run.jsonl" && fail "32 parts rerun: folded again"
[ "$(awk -F'\t' 'NR == 2 { print $3 }' "$tmp/long/summary.tsv")" = "$files" ] ||
	fail "32 parts rerun: another file column"

# --- fragment names are reserved -----------------------------------------
mkfa 11 "$tmp/decoy.fa" r=40 r.part1of2=20 R.PART2OF2=20 r.frag21-40=20 r.frag1-20=20
run -i "$tmp/decoy.fa" -o "$tmp/decoy" --devices sim:2300K --precision fp32 2>"$tmp/decoy.err" ||
	fail "decoys: exited $?"
[ "$(awk -F'\t' '$2 == "r" { print $3 }' "$tmp/decoy/summary.tsv")" = r.part1of2.pdb,r.part2of2.pdb ] ||
	fail "decoys: r not split in two"
files=$(tail -n +2 "$tmp/decoy/summary.tsv" | cut -f3 | tr ',' '\n')
[ "$(echo "$files" | sort -fu | wc -l)" -eq 6 ] || fail "decoys: rows share a file: $(echo $files)"
for f in $files; do [ -s "$tmp/decoy/$f" ] || fail "decoys: $f missing"; done
for n in r.part1of2 R.PART2OF2 r.frag21-40 r.frag1-20; do
	f=$(awk -F'\t' -v n=$n '$2 == n { print $3 }' "$tmp/decoy/summary.tsv")
	grep -q FRAGMENT "$tmp/decoy/$f" && fail "decoys: $n's $f holds a fragment"
	grep -q "'$n' is reserved" "$tmp/decoy.err" || fail "decoys: no warning for $n"
done
[ "$(tail -n +2 "$tmp/decoy/summary.tsv" | cut -f6 | sort | uniq -c | tr -s ' \n' ' ')" = " 4 ok 1 split " ] ||
	fail "decoys: statuses"

# --- an output that cannot be written -------------------------------------
mkdir -p "$tmp/full/s1.pdb"
run -i "$tmp/four.fa" -o "$tmp/full" --devices cpu 2>"$tmp/full.err"
rc=$?
[ $rc -eq 1 ] || fail "unwritable: expected exit 1, got $rc"
[ "$(tail -n +2 "$tmp/full/summary.partial.tsv" 2>/dev/null | cut -f2,6 | tr '\t\n' ',,')" = \
  "s0,ok,s1,failed,s2,ok,s3,ok," ] || fail "unwritable: partial summary rows"
[ -e "$tmp/full/summary.tsv" ] && fail "unwritable: summary.tsv written"
grep -q 's1\.pdb' "$tmp/full.err" || fail "unwritable: the log does not name s1.pdb"
awk -F'\t' '$2 == "s1" { print $7 }' "$tmp/full/summary.partial.tsv" 2>/dev/null | grep -q 's1\.pdb' ||
	fail "unwritable: the reason does not name s1.pdb"
[ "$(wc -l <"$tmp/full/done.jsonl")" -eq 3 ] || fail "unwritable: done.jsonl lines"
for n in s0 s2 s3; do
	cmp -s "$tmp/slow/$n.pdb" "$tmp/full/$n.pdb" || fail "unwritable: $n.pdb differs"
done
rmdir "$tmp/full/s1.pdb"
run -i "$tmp/four.fa" -o "$tmp/full" --devices cpu || fail "unwritable rerun: exited $?"
[ "$(grep -c '"event":"skip"' "$tmp/full/run.jsonl")" -eq 3 ] || fail "unwritable rerun: skips"
[ "$(grep -c '"status":"ok"' "$tmp/full/run.jsonl")" -eq 1 ] || fail "unwritable rerun: folds"
cmp -s "$tmp/slow/s1.pdb" "$tmp/full/s1.pdb" || fail "unwritable rerun: s1.pdb differs"
[ "$(tail -n +2 "$tmp/full/summary.tsv" | cut -f6 | sort -u)" = ok ] || fail "unwritable rerun: not all ok"
[ -e "$tmp/full/summary.partial.tsv" ] && fail "unwritable rerun: the partial summary left"
# the summary itself
mkdir -p "$tmp/nosum/summary.tsv"
run -i "$tmp/four.fa" -o "$tmp/nosum" --devices cpu 2>"$tmp/nosum.err"
[ $? -eq 1 ] || fail "no summary: expected exit 1"
grep -q 'summary\.tsv' "$tmp/nosum.err" || fail "no summary: not said"
ls "$tmp/nosum" | grep -q '\.pdb$' && fail "no summary: folded before refusing"

# --- one run at a time into a directory -----------------------------------
ESMBATCH_FAULT=slowio:700 run -i "$tmp/four.fa" -o "$tmp/two" --devices cpu 2>"$tmp/two1.err" &
pid=$!
i=0
while [ ! -s "$tmp/two/run.jsonl" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
run -i "$tmp/four.fa" -o "$tmp/two" --devices cpu 2>"$tmp/two2.err"
rc=$?
[ $rc -eq 4 ] || fail "second run: expected exit 4, got $rc"
[ "$(wc -l <"$tmp/two2.err")" -eq 1 ] && grep -q 'another esmbatch run' "$tmp/two2.err" ||
	fail "second run: not one line: $(cat "$tmp/two2.err")"
wait $pid || fail "first run: exited $?"
[ "$(wc -l <"$tmp/two/done.jsonl")" -eq 4 ] || fail "two runs: done.jsonl lines"
[ "$(grep -c '"status":"ok"' "$tmp/two/run.jsonl")" -eq 4 ] || fail "two runs: run.jsonl"
[ "$(tail -n +2 "$tmp/two/summary.tsv" | cut -f6 | sort -u)" = ok ] || fail "two runs: not all ok"
# a killed run's temporaries: removed by the next run, which holds the lock
touch "$tmp/two/s9.pdb.tmp.999999" "$tmp/two/s9.pae.json.tmp" "$tmp/two/summary.tsv.tmp.1" \
	"$tmp/two/keep.tmp.2"
run -i "$tmp/four.fa" -o "$tmp/two" --devices cpu || fail "after a killed run: exited $?"
ls "$tmp/two" | grep -q '\.\(pdb\|json\|tsv\)\.tmp' && fail "temporaries left: $(ls "$tmp/two" | grep tmp)"
[ -e "$tmp/two/keep.tmp.2" ] || fail "a file not ours was removed"

finish
