#!/usr/bin/env bash
# test_cache.sh - fold --cache DIR (tiny_a model, CPU, one thread): a
# second run into a new -o with the same cache folds nothing (folds
# counted from run.jsonl's fold events, one per fold) and its outputs
# equal the first's byte for byte (the structures; the summary but for
# its source column, fold then cache), and so do a warm run's shards,
# merged (they fold nothing); the same sequence in other case
# or with another letter the model reads as X hits, under another name
# and --format its own files; other weights, recycles or chunk size
# never hit; the CPU at 1 and 2 threads gives identical files (so the
# thread count is not in the key); a corrupted entry (one byte flipped)
# and a truncated one are warned of in one line naming the entry, never
# served, refolded and replaced, and `cache verify` fails on them;
# --cache-max evicts the least recently used (a hit counts as a use).
. "${srcdir:-.}/tests/lib.sh"
w=$srcdir/tests/data/tiny_a/weights.safetensors
c=$tmp/cache
n=12
args=(-q --weights "$w" --devices cpu --num-recycles 0 -t 1)
run() { "$bin" "${args[@]}" "$@"; }
folds() { grep -c '"event":"fold"' "$1/run.jsonl"; }
hits() { grep -c '"event":"cache"' "$1/run.jsonl"; }
recs=()
for i in $(seq 1 $n); do recs+=("r$i=$((8 + i % 7))"); done
mkfa 11 "$tmp/in.fa" "${recs[@]}"

# cold, then warm into a new -o
run -i "$tmp/in.fa" -o "$tmp/a" --cache "$c" || fail "cold run exited $?"
[ "$(folds "$tmp/a")" -eq $n ] || fail "cold run: $(folds "$tmp/a") folds, expected $n"
ESMBATCH_CACHE=$c run -i "$tmp/in.fa" -o "$tmp/b" 2>"$tmp/b.err" || fail "warm run exited $?"
[ "$(folds "$tmp/b")" -eq 0 ] || fail "warm run folded $(folds "$tmp/b") (ESMBATCH_CACHE)"
[ "$(hits "$tmp/b")" -eq $n ] || fail "warm run: $(hits "$tmp/b") cache hits, expected $n"
for f in "$tmp"/a/*.pdb; do
	cmp -s "$f" "$tmp/b/${f##*/}" || fail "warm run: ${f##*/} differs from the cold run's"
done
[ "$(ls "$tmp"/b/*.pdb | wc -l)" -eq $n ] || fail "warm run: $(ls "$tmp"/b/*.pdb | wc -l) PDBs"
[ "$(cut -f1-21 "$tmp/a/summary.tsv")" = "$(cut -f1-21 "$tmp/b/summary.tsv")" ] ||
	fail "warm run: the summary rows differ from the cold run's"
[ "$(head -1 "$tmp/a/summary.tsv" | awk -F'\t' '{ print NF, $22 }')" = "23 source" ] ||
	fail "summary: no source column last: $(head -1 "$tmp/a/summary.tsv")"
[ "$(tail -n +2 "$tmp/a/summary.tsv" | cut -f22 | sort -u)" = fold ] || fail "cold run: source not fold"
[ "$(tail -n +2 "$tmp/b/summary.tsv" | cut -f22 | sort -u)" = cache ] || fail "warm run: source not cache"
# a rerun into the same -o keeps its rows (done.jsonl), cache column too
run -i "$tmp/in.fa" -o "$tmp/b" --cache "$c" || fail "rerun into b exited $?"
[ "$(tail -n +2 "$tmp/b/summary.tsv" | cut -f22 | sort -u)" = cache ] || fail "rerun: source changed"
"$bin" cache verify -o "$c" >"$tmp/v" || fail "cache verify exited $?: $(cat "$tmp/v")"
grep -qx "entries	$n" "$tmp/v" || fail "cache verify: $(cat "$tmp/v")"

# shards: a shard's hits are its own records; merge gives the table the
# cold run wrote, the source column aside
for k in 1 2; do
	run -i "$tmp/in.fa" -o "$tmp/sh" --cache "$c" --shard $k/2 || fail "shard $k/2 exited $?"
done
[ "$(cat "$tmp"/sh/run.*-of-2.jsonl | grep -c '"event":"fold"')" -eq 0 ] || fail "shards folded"
[ "$(cat "$tmp"/sh/run.*-of-2.jsonl | grep -c '"event":"cache"')" -eq $n ] || fail "shards: hits"
"$bin" merge -q -o "$tmp/sh" || fail "merge exited $?"
[ "$(cut -f1-21 "$tmp/a/summary.tsv")" = "$(cut -f1-21 "$tmp/sh/summary.tsv")" ] ||
	fail "merged shards: the summary rows differ from the cold run's"

# the sequence as the model folds it: lower case, B for X, other names,
# other files
awk -v OFS='' '/^>/ { print ">other_" substr($0, 2); next } { print tolower($0) }' "$tmp/in.fa" > "$tmp/lower.fa"
run -i "$tmp/lower.fa" -o "$tmp/lower" --cache "$c" --format pdb,cif --pae || fail "lower-case run exited $?"
[ "$(folds "$tmp/lower")" -eq 0 ] || fail "lower case: folded $(folds "$tmp/lower")"
grep -q '^data_other_r1$' "$tmp/lower/other_r1.cif" || fail "lower case: the mmCIF not under its own name"
[ -s "$tmp/lower/other_r1.pae.json" ] || fail "lower case: no PAE"
diff <(grep '^ATOM' "$tmp/a/r1.pdb") <(grep '^ATOM' "$tmp/lower/other_r1.pdb") >/dev/null ||
	fail "lower case: other atoms"
printf '>bx\nMKXLLVAAGXSTKPEDW\n' > "$tmp/x.fa"
printf '>bz\nMKBLLVAAGZSTKPEDW\n' > "$tmp/b.fa"
run -i "$tmp/x.fa" -o "$tmp/x" --cache "$c" || fail "X run exited $?"
run -i "$tmp/b.fa" -o "$tmp/bz" --cache "$c" || fail "B run exited $?"
[ "$(folds "$tmp/bz")" -eq 0 ] || fail "B and Z (read as X) did not hit X's entry"

# what changes the result never hits
"$mkw" --config "$srcdir/tests/data/tiny_a/config.json" -o "$tmp/w2.safetensors" --seed 5 >/dev/null 2>&1 ||
	fail "mkweights exited $?"
"$bin" -q --weights "$tmp/w2.safetensors" --devices cpu --num-recycles 0 -t 1 -i "$tmp/in.fa" \
	-o "$tmp/w2" --cache "$c" || fail "other weights: exited $?"
[ "$(folds "$tmp/w2")" -eq $n ] || fail "other weights: $(folds "$tmp/w2") folds, expected $n"
"$bin" -q --weights "$w" --devices cpu --num-recycles 1 -t 1 -i "$tmp/in.fa" -o "$tmp/rc1" \
	--cache "$c" || fail "other recycles: exited $?"
[ "$(folds "$tmp/rc1")" -eq $n ] || fail "other recycles: $(folds "$tmp/rc1") folds, expected $n"
run -i "$tmp/in.fa" -o "$tmp/ch4" --cache "$c" --chunk-size 4 || fail "chunk 4: exited $?"
[ "$(folds "$tmp/ch4")" -eq $n ] || fail "chunk 4: $(folds "$tmp/ch4") folds, expected $n"
nd=0
for f in "$tmp"/a/*.pdb; do
	cmp -s <(grep '^ATOM' "$f") <(grep '^ATOM' "$tmp/ch4/${f##*/}") || nd=$((nd + 1))
done
echo "chunk size 4: atoms differ from unchunked in $nd of $n records (so the chunk is in the key)"

# the thread count is not in the key: 1 and 2 threads, the same bytes
head -6 "$tmp/in.fa" > "$tmp/three.fa"
"$bin" -q --weights "$w" --devices cpu --num-recycles 0 -t 2 -i "$tmp/three.fa" -o "$tmp/t2" ||
	fail "2 threads: exited $?"
for f in "$tmp"/t2/*.pdb; do
	cmp -s "$f" "$tmp/a/${f##*/}" || fail "2 threads: ${f##*/} differs from 1 thread's"
done
# and so on CBLAS (ESMBATCH_CPU_BLAS=1, the path of a CPU without AVX-512)
for t in 1 2; do
	ESMBATCH_CPU_BLAS=1 "$bin" -q --weights "$w" --devices cpu --num-recycles 0 -t $t \
		-i "$tmp/three.fa" -o "$tmp/blas$t" || fail "CBLAS, $t threads: exited $?"
done
for f in "$tmp"/blas1/*.pdb; do
	cmp -s "$f" "$tmp/blas2/${f##*/}" || fail "CBLAS: ${f##*/} differs between 1 and 2 threads"
done

# a flipped byte and a truncated entry: warned, never served, refolded
c=$tmp/cache3
run -i "$tmp/in.fa" -o "$tmp/c3" --cache "$c" || fail "cache3: exited $?"
ents=($(find "$c" -name '*.esmc' | sort))
[ ${#ents[@]} -eq $n ] || fail "cache3: ${#ents[@]} entries"
e1=${ents[0]} e2=${ents[1]}
python3 - "$e1" "$e2" <<'PY'
import os, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[len(b) // 2] ^= 0x10
open(sys.argv[1], "wb").write(bytes(b))
os.truncate(sys.argv[2], os.path.getsize(sys.argv[2]) - 100)
PY
"$bin" cache verify -o "$c" >"$tmp/v" 2>"$tmp/v.err" && fail "cache verify passed a corrupt cache"
grep -qx "corrupt	2" "$tmp/v" || fail "cache verify: $(cat "$tmp/v")"
grep -q "$e1: checksum mismatch" "$tmp/v.err" || fail "cache verify: $e1 not named: $(cat "$tmp/v.err")"
run -i "$tmp/in.fa" -o "$tmp/re" --cache "$c" 2>"$tmp/re.err" || fail "refold run exited $?"
[ "$(folds "$tmp/re")" -eq 2 ] || fail "corrupt entries: $(folds "$tmp/re") folds, expected 2"
[ "$(grep -c "cache entry $e1: checksum mismatch: ignored" "$tmp/re.err")" -eq 1 ] ||
	fail "flipped byte: not one warning naming $e1: $(cat "$tmp/re.err")"
[ "$(grep -c "cache entry $e2: truncated: ignored" "$tmp/re.err")" -eq 1 ] ||
	fail "truncated: not one warning naming $e2: $(cat "$tmp/re.err")"
for f in "$tmp"/a/*.pdb; do
	cmp -s "$f" "$tmp/re/${f##*/}" || fail "after refolding: ${f##*/} differs"
done
"$bin" cache verify -o "$c" >"$tmp/v" 2>&1 || fail "refolded entries not replaced: $(cat "$tmp/v")"

# --cache-max: the least recently used go; a hit is a use
c2=$tmp/lru
mkfa 12 "$tmp/six.fa" s1=12 s2=12 s3=12 s4=12 s5=12 s6=12
mkfa 13 "$tmp/two.fa" t1=12 t2=12
run -i "$tmp/six.fa" -o "$tmp/l1" --cache "$c2" || fail "lru: first run exited $?"
awk 'BEGIN { RS = ">" } $1 == "s1" { print ">" $0 }' "$tmp/six.fa" > "$tmp/s1.fa"
sleep 1
run -i "$tmp/s1.fa" -o "$tmp/l2" --cache "$c2" || fail "lru: the hit exited $?"
[ "$(folds "$tmp/l2")" -eq 0 ] || fail "lru: s1 not a hit"
size=$(find "$c2" -name '*.esmc' -printf '%s\n' | head -1)
before=$(find "$c2" -name '*.esmc' -printf '%T@ %p\n' | sort -n | awk '{ print $2 }')
# room for 7 entries: the 8th evicts down to 90% (6 entries): the two oldest go
run -i "$tmp/two.fa" -o "$tmp/l3" --cache "$c2" --cache-max $((size * 7 + size / 2)) ||
	fail "lru: the evicting run exited $?"
gone=$(for e in $before; do [ -e "$e" ] || echo "$e"; done)
[ "$gone" = "$(echo "$before" | head -2)" ] || fail "lru: evicted '$gone', expected the two oldest"
[ "$(find "$c2" -name '*.esmc' | wc -l)" -eq 6 ] || fail "lru: $(find "$c2" -name '*.esmc' | wc -l) entries left"
run -i "$tmp/s1.fa" -o "$tmp/l4" --cache "$c2" || fail "lru: the second hit exited $?"
[ "$(folds "$tmp/l4")" -eq 0 ] || fail "lru: the recently used s1 was evicted"
"$bin" cache prune -o "$c2" --cache-max $((size * 3)) > "$tmp/p" || fail "cache prune exited $?"
grep -qx "entries	3" "$tmp/p" || fail "cache prune --cache-max: $(cat "$tmp/p")"
finish
