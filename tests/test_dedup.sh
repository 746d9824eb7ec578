#!/usr/bin/env bash
# test_dedup.sh - records of the same sequence folded once (demo model,
# CPU): a FASTA of 30 records of 10 distinct sequences (each thrice: as
# drawn, lower-case, and with its X written B or Z; one a dimer) folds 10
# (run.jsonl's fold events, one per model_fold), writes every record's
# PDB, mmCIF and PAE under its own name and a row each whose same_as names
# the first record of its sequence ("-" for that one), counts 10 in its
# [k/N] lines, and its outputs equal a --no-dedup run's (30 folds) record
# by record, byte for byte, the summary rows bar the timing and memory
# columns and same_as; a copy's files are its original's but for its name
# (the mmCIF's data_ block and ids).  plan counts both.  Resuming: a
# rerun folds nothing; a copy's files removed, a rerun folds it alone (its
# original was done before); an original's removed, it alone; killed
# by SIGKILL and rerun, no sequence all of whose records were done is
# folded again.  A split
# record's copy is split the same (sim devices), its fragments its own; a
# copy that cannot be written (a directory in its way) fails alone, and a
# rerun folds it.  Shards: each folds its own records' distinct
# sequences, merge has every row.
. "${srcdir:-.}/tests/lib.sh"

python3 - "$tmp/in.fa" <<'PY'
import random, sys
random.seed(11)
aa = "ACDEFGHIKLMNPQRSTVWY"
seqs = []
for k in range(10):
    s = "".join(random.choice(aa) for _ in range(random.randint(25, 45)))
    s = s[:7] + "X" + s[8:]
    if k == 3:
        s = s[:15] + ":" + s[15:]
    seqs.append(s)
recs = [(k, v) for k in range(10) for v in range(3)]
random.shuffle(recs)
with open(sys.argv[1], "w") as f:
    for i, (k, v) in enumerate(recs):
        s = seqs[k]
        if v == 1:
            s = s.lower()
        elif v == 2:
            s = s.replace("X", "BZ"[k % 2])
        f.write(">s%d_%d rec %d\n%s\n" % (k, v, i, s))
PY
args=(-q -i "$tmp/in.fa" --weights "$demo" --devices cpu --num-recycles 0 --format pdb,cif --pae)
folds() { grep -c '"event":"fold".*"status":"ok"' "$1/run.jsonl"; }

"$bin" "${args[@]/-q/-v}" -o "$tmp/d" 2>"$tmp/d.err" || fail "dedup run exited $?"
"$bin" "${args[@]}" -o "$tmp/n" --no-dedup || fail "--no-dedup run exited $?"
[ "$(folds "$tmp/d")" -eq 10 ] || fail "dedup: $(folds "$tmp/d") folds, expected 10"
[ "$(folds "$tmp/n")" -eq 30 ] || fail "--no-dedup: $(folds "$tmp/n") folds, expected 30"
for e in pdb cif pae.json; do
	[ "$(ls "$tmp/d"/*.$e | wc -l)" -eq 30 ] || fail "dedup: $(ls "$tmp/d"/*.$e | wc -l) .$e files"
done
grep -q '\[10/10\]' "$tmp/d.err" && ! grep -q '/30\]' "$tmp/d.err" || fail "dedup: [k/N] not of 10"
for f in "$tmp/n"/*.pdb "$tmp/n"/*.cif "$tmp/n"/*.pae.json; do
	cmp -s "$f" "$tmp/d/${f##*/}" || fail "${f##*/}: differs from the --no-dedup run's"
done
# the rows: equal bar seconds..device_used (10-14) and same_as (23)
cut -f 1-9,15-22 "$tmp/n/summary.tsv" >"$tmp/n.rows"
cut -f 1-9,15-22 "$tmp/d/summary.tsv" >"$tmp/d.rows"
cmp -s "$tmp/n.rows" "$tmp/d.rows" || fail "summary rows differ: $(diff "$tmp/n.rows" "$tmp/d.rows" | head -4)"
python3 - "$tmp/in.fa" "$tmp/d" "$tmp/n" <<'PY' || fail "same_as or copies wrong"
import csv, sys
names = [l[1:].split()[0] for l in open(sys.argv[1]) if l.startswith(">")]
first = {}
for n in names:
    first.setdefault(n.split("_")[0], n)
for d, dedup in ((sys.argv[2], True), (sys.argv[3], False)):
    rows = list(csv.reader(open(d + "/summary.tsv"), delimiter="\t"))
    assert rows[0][-1] == "same_as" and len(rows[0]) == 23, rows[0]
    assert [r[1] for r in rows[1:]] == names
    for r in rows[1:]:
        assert len(r) == 23 and r[5] == "ok", r
        want = first[r[1].split("_")[0]] if dedup else r[1]
        assert r[22] == ("-" if want == r[1] else want), (r[1], r[22], want)
d = sys.argv[2]
for n in names:
    o = first[n.split("_")[0]]
    assert open("%s/%s.pdb" % (d, n), "rb").read() == open("%s/%s.pdb" % (d, o), "rb").read(), n
    cif = open("%s/%s.cif" % (d, n)).read()
    assert cif.replace(n, o) == open("%s/%s.cif" % (d, o)).read(), n
    assert cif.startswith("data_%s\n" % n), n
PY
[ "$(wc -l <"$tmp/d/done.jsonl")" -eq 30 ] || fail "dedup: $(wc -l <"$tmp/d/done.jsonl") done.jsonl lines"

# plan: records and distinct sequences
"$bin" plan -q -i "$tmp/in.fa" >"$tmp/plan" || fail "plan exited $?"
grep -q $'^total\t30\t' "$tmp/plan" && grep -q $'^distinct\t10\t' "$tmp/plan" ||
	fail "plan: $(tail -2 "$tmp/plan")"
"$bin" plan -q -i "$tmp/in.fa" --no-dedup | grep -q $'^distinct\t30\t' || fail "plan --no-dedup"

# resuming: nothing again; a copy alone; an original alone
"$bin" "${args[@]}" -o "$tmp/d" || fail "rerun exited $?"
[ "$(folds "$tmp/d")" -eq 0 ] || fail "rerun: $(folds "$tmp/d") folds, expected 0"
copy=$(awk -F'\t' 'NR > 1 && $23 != "-" { print $2; exit }' "$tmp/d/summary.tsv")
orig=$(awk -F'\t' -v c="$copy" '$2 == c { print $23 }' "$tmp/d/summary.tsv")
rm "$tmp/d/$copy.pdb"
"$bin" "${args[@]}" -o "$tmp/d" || fail "rerun, $copy removed, exited $?"
[ "$(folds "$tmp/d")" -eq 1 ] || fail "rerun, $copy removed: $(folds "$tmp/d") folds, expected 1"
cmp -s "$tmp/d/$copy.pdb" "$tmp/n/$copy.pdb" || fail "$copy refolded: not the same PDB"
rm "$tmp/d/$orig.cif"
"$bin" "${args[@]}" -o "$tmp/d" || fail "rerun, $orig removed, exited $?"
[ "$(folds "$tmp/d")" -eq 1 ] || fail "rerun, $orig removed: $(folds "$tmp/d") folds, expected 1"
cmp -s "$tmp/d/$orig.cif" "$tmp/n/$orig.cif" || fail "$orig refolded: not the same mmCIF"
cut -f 1-9,15-22 "$tmp/d/summary.tsv" | cmp -s - "$tmp/n.rows" || fail "resumed rows differ"

# killed (SIGKILL) after some folds, rerun: no sequence whose records
# were all done is folded again, and the outputs are complete
"$bin" "${args[@]}" -o "$tmp/k" 2>/dev/null &
pid=$!
i=0
while [ "$(cat "$tmp/k/done.jsonl" 2>/dev/null | wc -l)" -lt 8 ] && [ $i -lt 1200 ] && kill -0 $pid 2>/dev/null; do
	sleep 0.05
	i=$((i + 1))
done
kill -KILL $pid 2>/dev/null
{ wait $pid; } 2>/dev/null
cp "$tmp/k/done.jsonl" "$tmp/k.done" 2>/dev/null || : >"$tmp/k.done"
[ "$(wc -l <"$tmp/k.done")" -ge 8 ] && [ "$(wc -l <"$tmp/k.done")" -lt 30 ] ||
	fail "killed: $(wc -l <"$tmp/k.done") records done, expected some, not all"
"$bin" "${args[@]}" -o "$tmp/k" || fail "killed, rerun: exit $?"
python3 - "$tmp/in.fa" "$tmp/k.done" "$tmp/k/run.jsonl" <<'PY' || fail "killed, rerun: folded again"
import json, sys
names = [l[1:].split()[0] for l in open(sys.argv[1]) if l.startswith(">")]
done = {json.loads(l)["name"] for l in open(sys.argv[2]) if l.endswith("\n")}
key = lambda n: n.split("_")[0]
whole = {key(n) for n in names if all(m in done for m in names if key(m) == key(n))}
ev = [json.loads(l) for l in open(sys.argv[3])]
again = [names[e["record"]] for e in ev if e["event"] == "fold" and key(names[e["record"]]) in whole]
assert not again, again
PY
for f in "$tmp/n"/*.pdb "$tmp/n"/*.cif; do
	cmp -s "$f" "$tmp/k/${f##*/}" || fail "killed, rerun: ${f##*/} differs"
done

# a split record's copy: split the same, its fragments under its name
mkfa 5 "$tmp/long.fa" a=200
sed -n 2p "$tmp/long.fa" | sed '1i >b' >>"$tmp/long.fa"
for m in d n; do
	nd=(); [ $m = n ] && nd=(--no-dedup)
	"$bin" -q -i "$tmp/long.fa" -o "$tmp/long$m" --weights "$demo" --num-recycles 0 \
		--devices sim:3M,sim:2500K ${nd[@]+"${nd[@]}"} || fail "split $m: exited $?"
done
[ "$(folds "$tmp/longd")" -lt "$(folds "$tmp/longn")" ] || fail "split: the copy folded"
awk -F'\t' 'NR == 3 && $2 == "b" && $6 == "split" && $3 ~ /^b\.part1of/ && $23 == "a" { ok = 1 }
	END { exit !ok }' "$tmp/longd/summary.tsv" || fail "split copy: $(tail -1 "$tmp/longd/summary.tsv")"
for f in "$tmp/longn"/*.pdb; do
	cmp -s "$f" "$tmp/longd/${f##*/}" || fail "split: ${f##*/} differs from --no-dedup's"
done
[ "$(ls "$tmp/longd"/*.pdb | wc -l)" -eq "$(ls "$tmp/longn"/*.pdb | wc -l)" ] || fail "split: files"

# a copy that cannot be written fails alone; a rerun folds it
mkdir -p "$tmp/w/$copy.pdb"
"$bin" "${args[@]}" -o "$tmp/w" 2>"$tmp/w.err"
rc=$?
[ $rc -eq 1 ] || fail "copy not written: exit $rc, expected 1"
awk -F'\t' -v c="$copy" -v o="$orig" '$2 == c && $6 != "failed" || $2 == o && $6 != "ok" { bad = 1 }
	END { exit bad }' "$tmp/w/summary.partial.tsv" || fail "copy not written: rows"
[ "$(awk -F'\t' 'NR > 1 && $6 == "failed"' "$tmp/w/summary.partial.tsv" | wc -l)" -eq 1 ] ||
	fail "copy not written: more than it failed"
rmdir "$tmp/w/$copy.pdb"
"$bin" "${args[@]}" -o "$tmp/w" || fail "copy not written, rerun: exit $?"
[ "$(folds "$tmp/w")" -eq 1 ] || fail "copy not written, rerun: $(folds "$tmp/w") folds"

# shards: each its own records' sequences once; merge has every row
"$bin" "${args[@]}" -o "$tmp/s" --shard 1/2 || fail "shard 1/2 exited $?"
"$bin" "${args[@]}" -o "$tmp/s" --shard 2/2 || fail "shard 2/2 exited $?"
"$bin" merge -q -o "$tmp/s" || fail "merge exited $?"
[ "$(tail -n +2 "$tmp/s/summary.tsv" | wc -l)" -eq 30 ] || fail "merge: not 30 rows"
n=$(cat "$tmp/s"/run.*-of-2.jsonl | grep -c '"event":"fold".*"status":"ok"')
[ "$n" -ge 10 ] && [ "$n" -le 20 ] || fail "shards: $n folds, expected 10 to 20"
for f in "$tmp/n"/*.pdb; do
	cmp -s "$f" "$tmp/s/${f##*/}" || fail "shards: ${f##*/} differs"
done
finish
