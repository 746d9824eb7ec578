#!/usr/bin/env bash
# test_shard_merge.sh - fold --shard K/N and merge (demo model, CPU), against a
# single-process run of the same mixed-length FASTA:
# - shards 1/3, 2/3 and 3/3 into one directory, merged: summary.tsv (less
#   its timing and memory columns) and every PDB's ATOM records equal the
#   single run's; a second merge writes the same file;
# - shard 2 killed -9 mid-run: merge exits 3 naming the shards not done;
#   the rerun of shard 2 folds only what it had not finished;
# - while a shard runs: the same shard, a run of the whole input and a
#   merge exit 4 with one line; another shard runs beside it;
# - plan --shards 3 prints the partition fold --shard folds; --shard auto
#   reads the Slurm array variables;
# - merge refuses shards of another N or input (exit 1), lists failed
#   records (exit 3); bad --shard values are usage errors.
. "${srcdir:-.}/tests/lib.sh"
args=(-q --weights "$demo" --num-recycles 0 --devices cpu -t 2)
run() { "$bin" "${args[@]}" "$@"; }
# keep_cols FILE: the summary less the columns that differ run to run
keep_cols() {
	awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) keep[i] = $i !~ /second|bytes|time|rss|memory/ }
	            { s = ""; for (i = 1; i <= NF; i++) if (keep[i]) s = s $i "\t"; print s }' "$1"
}
# same_atoms A B LABEL: every PDB of A has B's ATOM records, and B no other PDB
same_atoms() {
	local f n=0
	for f in "$1"/*.pdb; do
		n=$((n + 1))
		cmp -s <(grep '^ATOM' "$f") <(grep '^ATOM' "$2/$(basename "$f")") ||
			fail "$3: $(basename "$f"): ATOM records differ"
	done
	[ "$n" -eq "$(ls "$2" | grep -c '\.pdb$')" ] || fail "$3: $n PDBs, not $(ls "$2" | grep -c '\.pdb$')"
	[ "$n" -gt 0 ] || fail "$3: no PDB"
}
count() { grep -c "$1" "$2" 2>/dev/null || true; }

mkfa 19 "$tmp/mix.fa" a=90 b=12 c=61 d=7 e=40 f=75 g=23 h=33 i=5 j=52 k=18 l=28
run -i "$tmp/mix.fa" -o "$tmp/one" || fail "single run: exited $?"

# --- the partition ---------------------------------------------------------
"$bin" plan -i "$tmp/mix.fa" --shards 3 >"$tmp/plan.tsv" || fail "plan --shards: exited $?"
sed -n '/^shard\t/,$p' "$tmp/plan.tsv" >"$tmp/parts.tsv"
[ "$(tail -n +2 "$tmp/parts.tsv" | cut -f1 | tr '\n' ' ')" = "1/3 2/3 3/3 " ] ||
	fail "plan --shards: rows $(cat "$tmp/parts.tsv")"
[ "$(tail -n +2 "$tmp/parts.tsv" | awk '{ n += $2; r += $3 } END { print n, r }')" = "12 444" ] ||
	fail "plan --shards: records and residues do not add up: $(cat "$tmp/parts.tsv")"
# lengths^2 sum to 25558: longest first puts 90^2 alone until the others
# catch up; LPT's bound: no shard more than the largest cost (8100) from the mean
awk -F'\t' 'NR > 1 { d = $4 - 25558 / 3; if (d < -8100 || d > 8100) exit 1 }' "$tmp/parts.tsv" ||
	fail "plan --shards: unbalanced: $(cat "$tmp/parts.tsv")"

# --- shard 2 killed mid-run; the lock while it runs ------------------------
sh=$tmp/sh
ESMBATCH_FAULT=slowio:2500 "$bin" "${args[@]}" -i "$tmp/mix.fa" -o "$sh" --shard 2/3 2>"$tmp/s2.err" &
pid=$!
i=0
while [ ! -s "$sh/run.2-of-3.jsonl" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
for what in "the same shard:--shard 2/3" "the whole input:" ; do
	run -i "$tmp/mix.fa" -o "$sh" ${what#*:} 2>"$tmp/busy.err"
	rc=$?
	[ $rc -eq 4 ] || fail "${what%%:*} beside shard 2: expected exit 4, got $rc"
	[ "$(wc -l <"$tmp/busy.err")" -eq 1 ] && grep -q 'another esmbatch run' "$tmp/busy.err" ||
		fail "${what%%:*} beside shard 2: not one line: $(cat "$tmp/busy.err")"
done
"$bin" merge -o "$sh" 2>"$tmp/busy.err"
rc=$?
[ $rc -eq 4 ] || fail "merge beside shard 2: expected exit 4, got $rc"
grep -q '\.esmbatch\.lock' "$tmp/busy.err" || fail "merge beside shard 2: $(cat "$tmp/busy.err")"
i=0
while [ "$(count . "$sh/done.2-of-3.jsonl")" -lt 1 ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
kill -9 $pid
wait $pid 2>/dev/null
[ -e "$sh/summary.2-of-3.tsv" ] && fail "shard 2 ended before it was killed (test too slow?)"
in2=$(python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline())["in_shard"])' \
	"$sh/run.2-of-3.jsonl")
done2=$(count . "$sh/done.2-of-3.jsonl")
[ "$done2" -ge 1 ] && [ "$done2" -lt "$in2" ] || fail "killed shard 2: $done2 of $in2 records done"
"$bin" merge -o "$sh" 2>"$tmp/m1.err"
rc=$?
[ $rc -eq 3 ] || fail "merge with shards missing: expected exit 3, got $rc"
for k in 1 2 3; do grep -q "shard $k/3: no summary" "$tmp/m1.err" || fail "merge: shard $k/3 not listed"; done

# the rerun of shard 2 beside shard 3, then shard 1.  Shard 2 removes the
# temporaries of its own summary and report that its killed run left;
# neither touches shard 1's (shard 1 may be writing it: here a stand-in)
touch "$sh/summary.2-of-3.tsv.tmp.99999" "$sh/report.2-of-3.html.tmp.99998" \
	"$sh/summary.1-of-3.tsv.tmp.99997"
"$bin" "${args[@]}" -i "$tmp/mix.fa" -o "$sh" --shard 2/3 &
pid=$!
run -i "$tmp/mix.fa" -o "$sh" --shard 3/3 || fail "shard 3/3: exited $?"
wait $pid || fail "shard 2/3 rerun: exited $?"
for f in summary.2-of-3.tsv.tmp.99999 report.2-of-3.html.tmp.99998; do
	[ -e "$sh/$f" ] && fail "shard 2/3 rerun: left $f"
done
[ -e "$sh/summary.1-of-3.tsv.tmp.99997" ] || fail "shard 2 or 3 removed shard 1's summary temporary"
rm "$sh/summary.1-of-3.tsv.tmp.99997"
run -i "$tmp/mix.fa" -o "$sh" --shard 1/3 || fail "shard 1/3: exited $?"
[ "$(count '"event":"skip"' "$sh/run.2-of-3.jsonl")" -eq "$done2" ] || fail "shard 2 rerun: skips"
[ "$(count '"status":"ok"' "$sh/run.2-of-3.jsonl")" -eq $((in2 - done2)) ] || fail "shard 2 rerun: folds"
for k in 1 2 3; do
	[ "$(tail -n +2 "$sh/summary.$k-of-3.tsv" | wc -l)" -eq "$(awk -F'\t' -v k=$k/3 '$1 == k { print $2 }' "$tmp/parts.tsv")" ] ||
		fail "shard $k/3: its rows are not the plan's records"
done
"$bin" merge -o "$sh" || fail "merge: exited $?"
cmp -s <(keep_cols "$tmp/one/summary.tsv") <(keep_cols "$sh/summary.tsv") ||
	fail "merged summary differs: $(diff <(keep_cols "$tmp/one/summary.tsv") <(keep_cols "$sh/summary.tsv") | head -5)"
same_atoms "$tmp/one" "$sh" "merged"
cp "$sh/summary.tsv" "$tmp/merged1.tsv"
"$bin" merge -o "$sh" || fail "second merge: exited $?"
cmp -s "$tmp/merged1.tsv" "$sh/summary.tsv" || fail "second merge: another summary.tsv"

# --shard auto: Slurm's array task 7 of --array=5-7 is shard 3/3 (all done)
SLURM_ARRAY_TASK_ID=7 SLURM_ARRAY_TASK_MIN=5 SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_MAX=7 \
	run -i "$tmp/mix.fa" -o "$sh" --shard auto || fail "--shard auto: exited $?"
[ "$(count '"event":"skip"' "$sh/run.3-of-3.jsonl")" -eq "$(tail -n +2 "$sh/summary.3-of-3.tsv" | wc -l)" ] ||
	fail "--shard auto: not shard 3/3"

# --- merge refuses, lists ---------------------------------------------------
cp -r "$sh" "$tmp/n2"
cp "$tmp/n2/summary.1-of-3.tsv" "$tmp/n2/summary.1-of-2.tsv"
"$bin" merge -o "$tmp/n2" 2>"$tmp/n2.err"
rc=$?
[ $rc -eq 1 ] && grep -q 'different N' "$tmp/n2.err" || fail "mismatched N: exit $rc, $(cat "$tmp/n2.err")"
cp -a "$sh" "$tmp/other"   # times kept: merge checks a file's size and mtime
sed -i '1s/"input":"[0-9a-f]*"/"input":"0123456789abcdef"/' "$tmp/other/run.3-of-3.jsonl"
"$bin" merge -o "$tmp/other" 2>"$tmp/other.err"
rc=$?
[ $rc -eq 1 ] && grep -q 'different inputs' "$tmp/other.err" || fail "other input: exit $rc, $(cat "$tmp/other.err")"
rm "$tmp/other/summary.tsv" "$tmp/other/run.3-of-3.jsonl" "$tmp/other/summary.3-of-3.tsv"
"$bin" merge -o "$tmp/other" 2>"$tmp/other.err"
rc=$?
[ $rc -eq 3 ] && grep -q 'shard 3/3: no summary' "$tmp/other.err" || fail "shard 3 gone: exit $rc"
[ "$(tail -n +2 "$tmp/other/summary.partial.tsv" | wc -l)" -eq $((12 - $(awk -F'\t' '$1 == "3/3" { print $2 }' "$tmp/parts.tsv"))) ] ||
	fail "shard 3 gone: the other shards' rows not merged"
[ -e "$tmp/other/summary.tsv" ] && fail "shard 3 gone: summary.tsv written"
mkfa 19 "$tmp/bad.fa" x=9 bad=bad y=11
for k in 1 2; do run -i "$tmp/bad.fa" -o "$tmp/bad" --shard $k/2 2>"$tmp/bad.$k.err"; done
# the bad record is warned of once, by the shard that has it
[ "$(cat "$tmp/bad.1.err" "$tmp/bad.2.err" | grep -c "'bad': invalid")" -eq 1 ] ||
	fail "bad record: not one warning over the shards: $(cat "$tmp/bad.1.err" "$tmp/bad.2.err")"
"$bin" merge -o "$tmp/bad" 2>"$tmp/bad.err"
rc=$?
[ $rc -eq 3 ] && grep -q 'record 1 (bad): failed' "$tmp/bad.err" || fail "failed record: exit $rc, $(cat "$tmp/bad.err")"
[ "$(cut -f2 "$tmp/bad/summary.tsv" | tr '\n' ' ')" = "name x bad y " ] || fail "failed record: rows"

# --- usage ---------------------------------------------------------------------
for a in 0/3 4/3 3 x/y; do
	run -i "$tmp/mix.fa" -o "$tmp/u" --shard $a 2>"$tmp/u.err"
	rc=$?
	[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/u.err")" -eq 1 ] || fail "--shard $a: exit $rc, $(cat "$tmp/u.err")"
done
env -u SLURM_ARRAY_TASK_ID "$bin" -q -i "$tmp/mix.fa" -o "$tmp/u" --weights "$demo" --shard auto 2>"$tmp/u.err"
rc=$?
[ $rc -eq 2 ] && grep -q 'SLURM_ARRAY_TASK_ID is not set' "$tmp/u.err" || fail "--shard auto outside Slurm: exit $rc"
[ -e "$tmp/u" ] && fail "a usage error created the output directory"
"$bin" merge 2>/dev/null; [ $? -eq 2 ] || fail "merge without -o: not exit 2"
"$bin" merge -o "$sh" --shard 1/3 2>/dev/null; [ $? -eq 2 ] || fail "merge --shard: not exit 2"
run -i "$tmp/mix.fa" -o "$tmp/u" --shards 3 2>/dev/null; [ $? -eq 2 ] || fail "fold --shards: not exit 2"
"$bin" merge -o "$tmp/nothing" 2>"$tmp/u.err"
[ $? -eq 1 ] || fail "merge of a missing directory: not exit 1"
finish
