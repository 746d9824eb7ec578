#!/usr/bin/env bash
# test_calibrate.sh - `esmbatch calibrate` on the CPU with the tiny_a
# fixture: the quota table reads back (through `plan --quota-table`), its
# rows hold allocated <= reserved and quota = ceil(reserved x safety) +
# worker_overhead, the SVG plot lies beside it, a table of other weights is
# not overwritten without --force, and fold warns about a table made for
# other weights.  Random weights from tools/mkweights fold too.
. "${srcdir:-.}/tests/lib.sh"
a=$srcdir/tests/data/tiny_a
b=$srcdir/tests/data/tiny_b

"$bin" calibrate -q --weights "$a/weights.safetensors" --devices cpu --lengths 8,24,40 \
	--num-recycles 0 -o "$tmp/cpu.tsv" > "$tmp/table" || fail "calibrate exited $?"
[ "$(head -1 "$tmp/table" | cut -f1-4)" = "$(printf 'length\tpredicted\tallocated\treserved')" ] ||
	fail "printed table header: $(head -1 "$tmp/table")"
[ "$(tail -n +2 "$tmp/table" | wc -l)" -eq 3 ] || fail "printed table rows"
grep -q '^<svg' "$tmp/cpu.svg" && grep -q '</svg>' "$tmp/cpu.svg" || fail "no SVG plot"
head -1 "$tmp/cpu.tsv" | grep -q 'device=cpu' || fail "header: no device"
for k in precision=fp32 safety=1.15 worker_overhead= weights_bytes= context= date= engine=; do
	head -1 "$tmp/cpu.tsv" | grep -q "$k" || fail "header: no $k"
done
ov=$(head -1 "$tmp/cpu.tsv" | tr '\t' '\n' | sed -n 's/^worker_overhead=//p')
tail -n +3 "$tmp/cpu.tsv" | awk -v ov="$ov" -F'\t' '
	{ q = $3 * 1.15; q = (q == int(q) ? q : int(q) + 1) + ov
	  if ($2 > $3 || $5 != q) { print "row " $0 " quota " q; bad = 1 } }
	END { exit bad }' || fail "rows: allocated <= reserved, quota = ceil(reserved x 1.15) + overhead"
printf '>s\nACDEFGHIKLMNPQRSTVWY\n' > "$tmp/one.fa"
"$bin" plan -q -i "$tmp/one.fa" --quota-table "$tmp/cpu.tsv" > "$tmp/plan" || fail "plan cannot read the table"
# every row is at most 40, so no default bucket has a quota
"$bin" calibrate -q --weights "$a/weights.safetensors" --devices cpu --lengths 8 \
	--num-recycles 0 --exclusive -o "$tmp/cpu.tsv" > /dev/null || fail "same weights: no overwrite"
head -1 "$tmp/cpu.tsv" | grep -q 'safety=1.3' || fail "--exclusive: safety 1.3"
if "$bin" calibrate -q --weights "$b/weights.safetensors" --devices cpu --lengths 8 \
	--num-recycles 0 -o "$tmp/cpu.tsv" > /dev/null 2> "$tmp/err"; then
	fail "overwrote a table of other weights"
fi
grep -q -- '--force' "$tmp/err" || fail "refusal does not mention --force"
"$bin" calibrate -q --weights "$b/weights.safetensors" --devices cpu --lengths 8 \
	--num-recycles 0 --force -o "$tmp/cpu.tsv" > /dev/null || fail "--force did not overwrite"
"$bin" -i "$tmp/one.fa" -o "$tmp/out" --weights "$a/weights.safetensors" \
	--quota-table "$tmp/cpu.tsv" 2> "$tmp/err" || fail "fold with a table exited $?"
grep -q 'made for weights' "$tmp/err" || fail "fold does not warn about a table of other weights"
if "$bin" calibrate -q --weights "$a/weights.safetensors" --lengths 8,4 -o "$tmp/x.tsv" 2>/dev/null; then
	fail "descending --lengths accepted"
fi

# random weights for tiny_b's config, with the config in the metadata only
mkdir -p "$tmp/rand"
"$mkw" --config "$b/config.json" -o "$tmp/rand/w.safetensors" --seed 5 --dtype bf16 2>/dev/null ||
	fail "mkweights exited $?"
"$bin" -q -i "$tmp/one.fa" -o "$tmp/rout" --weights "$tmp/rand/w.safetensors" --num-recycles 0 ||
	fail "fold with random weights exited $?"
[ "$(tail -n +2 "$tmp/rout/summary.tsv" | cut -f6)" = ok ] || fail "random weights: not ok"
[ "$(grep -c "\"event\":\"fold\"" "$tmp/rout/run.jsonl")" -eq 1 ] || fail "run.jsonl: one line per fold"

finish
