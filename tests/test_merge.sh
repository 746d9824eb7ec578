#!/usr/bin/env bash
# test_merge.sh - what `esmbatch merge` refuses and how it says so (demo
# model, CPU, two shards of four short records):
# - a torn shard row (fewer columns than the header): exit 1, one line
#   naming the shard file and line;
# - shards run with different --num-recycles or --format: exit 1, one line;
# - stray shard file names whose N is past the maximum: exit 1, one line
#   naming the file, at once; an N of 50000 with no shard run: every shard
#   missing in at most a dozen lines, no "some 0 missing";
# - a shard interrupted (SIGINT, its output step slowed): it leaves
#   summary.partial.2-of-2.tsv, no summary.2-of-2.tsv; merge exits 3, names
#   that shard unfinished in one line and writes summary.partial.tsv with
#   every row, no summary.tsv (an earlier merge's removed); once the shard
#   is rerun, merge writes summary.tsv and removes summary.partial.tsv.
. "${srcdir:-.}/tests/lib.sh"
mkfa 23 "$tmp/in.fa" a=12 b=9 c=15 d=7
shard() { "$bin" -q -i "$tmp/in.fa" --weights "$demo" --devices cpu -t 1 -o "$@"; }
# merged DIR NAME: merge DIR into $tmp/NAME.err; rc its exit status
merged() { "$bin" merge -o "$1" 2>"$tmp/$2.err"; rc=$?; }

shard "$tmp/ok" --num-recycles 0 --shard 1/2 || fail "shard 1/2: exited $?"
shard "$tmp/ok" --num-recycles 0 --shard 2/2 || fail "shard 2/2: exited $?"
merged "$tmp/ok" ok
[ $rc -eq 0 ] || fail "clean merge: exit $rc, $(head -c 300 "$tmp/ok.err")"

# a torn row
cp -a "$tmp/ok" "$tmp/torn"
awk -F'\t' -v OFS='\t' 'NR == 2 { NF = 13 } { print }' "$tmp/ok/summary.2-of-2.tsv" >"$tmp/torn/summary.2-of-2.tsv"
rm "$tmp/torn/summary.tsv"
merged "$tmp/torn" torn
[ $rc -eq 1 ] || fail "torn row: exit $rc, expected 1"
grep -q "summary.2-of-2.tsv:2: 13 columns, the header has 23" "$tmp/torn.err" &&
	[ "$(wc -l <"$tmp/torn.err")" -eq 1 ] || fail "torn row: $(head -c 300 "$tmp/torn.err")"
[ -e "$tmp/torn/summary.tsv" ] && fail "torn row: summary.tsv written"

# different settings
for what in "--num-recycles 1" "--num-recycles 0 --format cif"; do
	d=$tmp/set${what//[^a-z0-9]/}
	shard "$d" --num-recycles 0 --shard 1/2 || fail "$what: shard 1/2 exited $?"
	shard "$d" $what --shard 2/2 || fail "$what: shard 2/2 exited $?"
	merged "$d" set
	[ $rc -eq 1 ] || fail "shards with $what: exit $rc, expected 1"
	grep -q "shard 1/2 (.*) and shard 2/2 (.*) were run with different settings" "$tmp/set.err" &&
		[ "$(wc -l <"$tmp/set.err")" -eq 1 ] || fail "shards with $what: $(head -c 300 "$tmp/set.err")"
done

# stray names: N past the maximum
for f in summary.1-of-2147483647.tsv done.1-of-10000000.jsonl; do
	mkdir -p "$tmp/stray$f" && touch "$tmp/stray$f/$f"
	SECONDS=0
	merged "$tmp/stray$f" stray
	[ $rc -eq 1 ] || fail "$f: exit $rc, expected 1"
	grep -q "$f: not a shard's file" "$tmp/stray.err" && [ "$(wc -l <"$tmp/stray.err")" -eq 1 ] ||
		fail "$f: $(head -c 300 "$tmp/stray.err")"
	[ $SECONDS -lt 10 ] || fail "$f: $SECONDS s"
done
mkdir "$tmp/many" && touch "$tmp/many/done.1-of-50000.jsonl"
merged "$tmp/many" many
[ $rc -eq 3 ] || fail "N 50000, none run: exit $rc, expected 3"
[ "$(wc -l <"$tmp/many.err")" -le 12 ] || fail "N 50000: $(wc -l <"$tmp/many.err") lines"
grep -q "and 49990 more shard(s) of 50000 without their summary" "$tmp/many.err" ||
	fail "N 50000: $(tail -3 "$tmp/many.err")"
# a missing shard never run: said so, not "some 0 missing"
cp -a "$tmp/ok" "$tmp/gone"
rm "$tmp/gone/summary.2-of-2.tsv" "$tmp/gone/run.2-of-2.jsonl"
merged "$tmp/gone" gone
[ $rc -eq 3 ] || fail "shard 2 never run: exit $rc, expected 3"
grep -q "some 0" "$tmp/gone.err" && fail "shard 2 never run: $(head -c 300 "$tmp/gone.err")"
grep -q "0 missing and those of 1 shard(s) never run" "$tmp/gone.err" ||
	fail "shard 2 never run: $(head -c 300 "$tmp/gone.err")"

# an interrupted shard
mkfa 29 "$tmp/ten.fa" r0=30 r1=31 r2=32 r3=33 r4=34 r5=35 r6=36 r7=37 r8=38 r9=39
d=$tmp/part
shard "$d" --num-recycles 0 --shard 1/2 -i "$tmp/ten.fa" || fail "interrupted: shard 1/2 exited $?"
shard "$d" --num-recycles 0 --shard 2/2 -i "$tmp/ten.fa" || fail "interrupted: shard 2/2 exited $?"
merged "$d" part0
[ $rc -eq 0 ] && [ -f "$d/summary.tsv" ] || fail "interrupted: the first merge: exit $rc"
mkfa 29 "$tmp/ten.fa" r0=30 r1=31 r2=32 r3=33 r4=34 r5=35 r6=36 r7=37 r8=38 r9=39 r10=40 r11=41 \
	r12=42 r13=43 r14=44 r15=45
rm "$d"/done.2-of-2.jsonl
# not through shard(): $! is esmbatch
ESMBATCH_FAULT=slowio:1500 "$bin" -q -i "$tmp/ten.fa" --weights "$demo" --devices cpu -t 1 -o "$d" \
	--num-recycles 0 --shard 2/2 2>/dev/null &
pid=$!
i=0
while [ ! -s "$d/done.2-of-2.jsonl" ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i + 1)); done
kill -INT $pid
wait $pid
[ $? -eq 1 ] || fail "interrupted shard: not exit 1"
[ -e "$d/summary.2-of-2.tsv" ] && fail "interrupted shard: summary.2-of-2.tsv there"
grep -q 'interrupted before it ran' "$d/summary.partial.2-of-2.tsv" 2>/dev/null ||
	fail "interrupted shard: no summary.partial.2-of-2.tsv with interrupted rows (test too slow?)"
shard "$d" --num-recycles 0 --shard 1/2 -i "$tmp/ten.fa" || fail "interrupted: shard 1/2 rerun exited $?"
merged "$d" part
[ $rc -eq 3 ] || fail "interrupted shard: merge exit $rc, expected 3"
[ "$(grep -c 'shard 2/2: not finished' "$tmp/part.err")" -eq 1 ] ||
	fail "interrupted shard: not named once: $(head -c 400 "$tmp/part.err")"
grep -q 'interrupted before it ran' "$tmp/part.err" && fail "interrupted shard: its rows listed one by one"
[ "$(tail -n +2 "$d/summary.partial.tsv" | wc -l)" -eq 16 ] || fail "interrupted shard: not 16 merged rows"
[ -e "$d/summary.tsv" ] && fail "interrupted shard: summary.tsv left or written"
shard "$d" --num-recycles 0 --shard 2/2 -i "$tmp/ten.fa" || fail "interrupted: shard 2/2 rerun exited $?"
[ -e "$d/summary.partial.2-of-2.tsv" ] && fail "shard 2/2 rerun: its partial summary left"
merged "$d" part2
[ $rc -eq 0 ] || fail "after the rerun: merge exit $rc: $(head -c 300 "$tmp/part2.err")"
[ "$(tail -n +2 "$d/summary.tsv" | cut -f6 | grep -c '^ok$')" -eq 16 ] || fail "after the rerun: not 16 ok"
[ -e "$d/summary.partial.tsv" ] && fail "after the rerun: summary.partial.tsv left"
finish
