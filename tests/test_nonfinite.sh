#!/usr/bin/env bash
# test_nonfinite.sh - non-finite numbers never pass as results: weights
# holding a NaN (a head) or an infinity (a language-model bias) are refused
# at load with one line naming the tensor (exit 1, nothing folded); a fold
# whose outputs are not finite (ESMBATCH_FAULT=nan:N makes the Nth fold's
# pTM a NaN) fails that record with the reason "non-finite output (pTM)",
# exit 3, is not journaled as done, and a rerun folds it again.
. "${srcdir:-.}/tests/lib.sh"

mkfa 5 "$tmp/in.fa" a=20 b=25 c=30
run() { "$bin" -i "$tmp/in.fa" --devices cpu --num-recycles 0 "$@"; }

# poison NAME VALUE DIR: DIR/w.safetensors, the demo model with element 0
# of tensor NAME (float32) set to VALUE, and its config.json
poison() {
	mkdir -p "$3" && cp "$srcdir/data/demo/config.json" "$3/" || return 1
	python3 - "$demo" "$1" "$2" "$3/w.safetensors" <<'PY'
import json, struct, sys
src, name, value, dst = sys.argv[1:]
data = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
t = json.loads(data[8:8 + n])[name]
assert t["dtype"] == "F32"
at = 8 + n + t["data_offsets"][0]
data[at:at + 4] = struct.pack("<f", float(value))
open(dst, "wb").write(data)
PY
}

for case in "ptm_head.weight nan NaN" "esm.encoder.layer.0.intermediate.dense.bias inf an.infinity"; do
	set -- $case
	poison "$1" "$2" "$tmp/w$2" || fail "cannot make the $2 weights"
	run -o "$tmp/o$2" --weights "$tmp/w$2/w.safetensors" 2>"$tmp/$2.err"
	rc=$?
	[ $rc -eq 1 ] || fail "$1 = $2: exit $rc, expected 1"
	grep -q "tensor '$1' holds ${3/./ } at element 0" "$tmp/$2.err" ||
		fail "$1 = $2: not named: $(cat "$tmp/$2.err")"
	[ "$(grep -c error "$tmp/$2.err")" -eq 1 ] || fail "$1 = $2: not one error line"
	ls "$tmp/o$2"/*.pdb >/dev/null 2>&1 && fail "$1 = $2: something was folded"
done

# a non-finite output: that record failed with a reason of its own
ESMBATCH_FAULT=nan:2 run -o "$tmp/out" --weights "$demo" --workers 1 2>"$tmp/nan.err"
rc=$?
[ $rc -eq 3 ] || fail "non-finite output: exit $rc, expected 3"
bad=$(awk -F'\t' '$6 == "failed" { print $2 "|" $7 }' "$tmp/out/summary.tsv")
case "$bad" in
[abc]"|non-finite output (pTM)") ;;
*) fail "non-finite output: failed rows '$bad'" ;;
esac
name=${bad%%|*}
grep -q "output error" "$tmp/out/summary.tsv" && fail "non-finite output called an output error"
[ -e "$tmp/out/$name.pdb" ] && fail "non-finite output: $name.pdb written"
grep -q "\"name\": *\"$name\"" "$tmp/out/done.jsonl" && fail "non-finite output journaled as done"
[ "$(awk -F'\t' '$6 == "ok"' "$tmp/out/summary.tsv" | wc -l)" -eq 2 ] || fail "the others not ok"
run -o "$tmp/out" --weights "$demo" 2>"$tmp/rerun.err" || fail "rerun exited $?"
[ -s "$tmp/out/$name.pdb" ] || fail "rerun did not fold $name"
finish
