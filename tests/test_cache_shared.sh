#!/usr/bin/env bash
# test_cache_shared.sh - four processes share one --cache over 200
# records (tiny_a model, CPU, one thread each), their inputs overlapping,
# each into its own -o; one is killed by SIGKILL while it writes an entry
# (ESMBATCH_FAULT=cacheput:MS holds it half-way through its temporary).
# Afterwards `cache verify` passes (the dead writer's temporary is no
# entry), no process folded a record twice, every record of a survivor
# was folded or taken from the cache, a structure is the same file
# whichever process made it, and a last run over all 200 folds exactly
# the records no entry holds.
. "${srcdir:-.}/tests/lib.sh"
w=$srcdir/tests/data/tiny_a/weights.safetensors
c=$tmp/cache
args=(-q --weights "$w" --devices cpu --num-recycles 0 -t 1 --cache "$c")
recs=()
for i in $(seq 0 199); do recs+=("p$i=$((6 + i % 9))"); done
mkfa 21 "$tmp/all.fa" "${recs[@]}"
# input k: records from 40k to 40k+119 (the last wraps round), every
# record in two or more inputs; the victim (k = 3) has three more
for k in 0 1 2 3; do
	awk -v k=$k 'BEGIN { RS = ">"; ORS = "" } NR > 1 { i = NR - 2; d = (i - 40 * k + 200) % 200;
		if (d < 120) print ">" $0 }' "$tmp/all.fa" > "$tmp/in$k.fa"
done
# the victim's own records, longer than any other (folded first): it
# writes an entry however many of its others the rest have cached
mkfa 22 "$tmp/own.fa" q0=30 q1=31 q2=32
cat "$tmp/own.fa" >> "$tmp/in3.fa"

for k in 0 1 2; do
	"$bin" "${args[@]}" -i "$tmp/in$k.fa" -o "$tmp/o$k" 2>"$tmp/err$k" &
	pids[$k]=$!
	sleep 1   # the later ones find some of the earlier ones' entries
done
ESMBATCH_FAULT=cacheput:30000 "$bin" "${args[@]}" -i "$tmp/in3.fa" -o "$tmp/o3" 2>"$tmp/err3" &
victim=$!
i=0
until [ -n "$(find "$c" -name "*.$victim.*.tmp" 2>/dev/null)" ] || [ $i -ge 600 ]; do
	sleep 0.1
	i=$((i + 1))
done
tmpf=$(find "$c" -name "*.$victim.*.tmp")
[ -n "$tmpf" ] || fail "the slow writer left no temporary"
kill -KILL $victim
{ wait $victim; } 2>/dev/null
for k in 0 1 2; do wait ${pids[$k]} || fail "process $k exited $?: $(tail -3 "$tmp/err$k")"; done

"$bin" cache verify -o "$c" >"$tmp/v" 2>&1 || fail "cache verify exited $?: $(cat "$tmp/v")"
grep -qx "corrupt	0" "$tmp/v" || fail "cache verify: $(cat "$tmp/v")"
grep -qx "temporaries	1" "$tmp/v" || fail "cache verify: the killed writer's temporary: $(cat "$tmp/v")"
for k in 0 1 2; do
	python3 - "$tmp/o$k/run.jsonl" "$tmp/o$k/summary.tsv" "$k" <<'PY' || fail "process $k"
import json, sys
folds, hits = {}, {}
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("event") == "fold":
        folds[e["record"]] = folds.get(e["record"], 0) + 1
    elif e.get("event") == "cache":
        hits[e["record"]] = hits.get(e["record"], 0) + 1
twice = [r for r, n in list(folds.items()) + list(hits.items()) if n > 1]
both = set(folds) & set(hits)
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[2])][1:]
src = sorted(set(r[21] for r in rows))
bad = twice or both or len(folds) + len(hits) != 120 or len(rows) != 120 or \
    sum(r[21] == "cache" for r in rows) != len(hits)
print("process %s: %d folded, %d from the cache" % (sys.argv[3], len(folds), len(hits)))
if bad:
    print("twice %s, both %s, %d rows, sources %s" % (twice, sorted(both), len(rows), src))
    sys.exit(1)
PY
done
for f in "$tmp"/o0/*.pdb "$tmp"/o1/*.pdb; do
	for k in 1 2; do
		g=$tmp/o$k/${f##*/}
		[ -e "$g" ] && [ "$g" != "$f" ] && { cmp -s "$f" "$g" || fail "${f##*/}: o$k's differs"; }
	done
done
entries=$(find "$c" -name '*.esmc' | wc -l)
"${bin}" "${args[@]}" -i "$tmp/all.fa" -o "$tmp/last" || fail "last run exited $?"
f=$(grep -c '"event":"fold"' "$tmp/last/run.jsonl")
h=$(grep -c '"event":"cache"' "$tmp/last/run.jsonl")
echo "last run: $f folded, $h from the $entries entries"
[ "$h" -eq "$entries" ] && [ $((f + h)) -eq 200 ] || fail "last run: $f folds, $h hits, $entries entries"
finish
