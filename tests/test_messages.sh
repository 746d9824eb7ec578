#!/usr/bin/env bash
# test_messages.sh - what esmbatch says when something is off:
# - a bad --devices element is a usage error (exit 2, one line), not a
#   fatal one (exit 1 tells a user to rerun);
# - a long option without its argument is named as given, no raw byte;
# - a run with nothing queued says so, not "no queued item fits";
# - a config.json beside a checkpoint that does not fit it is named;
# - the fragments a killed split run left (NAME.fragA-B.pdb) are removed
#   by the rerun;
# - calibrate does not overwrite a NAME.svg it did not write (--force does).
. "${srcdir:-.}/tests/lib.sh"
mkfa 29 "$tmp/in.fa" a=12 b=9
args=(--weights "$demo" --num-recycles 0 -t 1)

for d in abc cpu,abc sim:0 cuda:x; do
	"$bin" -i "$tmp/in.fa" -o "$tmp/d" "${args[@]}" --devices "$d" 2>"$tmp/d.err"
	rc=$?
	[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/d.err")" -eq 1 ] && grep -q -- "--devices ${d##*,}: expected" "$tmp/d.err" ||
		fail "--devices $d: exit $rc, $(head -c 300 "$tmp/d.err")"
done
[ -e "$tmp/d" ] && fail "a bad --devices created the output directory"

for o in --names --devices --quota-table -i; do
	"$bin" -o "$tmp/x" $o 2>"$tmp/o.err"
	rc=$?
	[ $rc -eq 2 ] || fail "$o without its argument: exit $rc"
	grep -qE "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} esmbatch: error: option $o needs an argument \(try --help\)$" "$tmp/o.err" &&
		[ "$(tr -d '\000' <"$tmp/o.err" | wc -c)" -eq "$(wc -c <"$tmp/o.err")" ] ||
		fail "$o without its argument: $(od -c "$tmp/o.err" | head -3)"
done

# nothing queued: every record done by the first run
"$bin" -i "$tmp/in.fa" -o "$tmp/o" "${args[@]}" --devices cpu 2>/dev/null || fail "fold exited $?"
"$bin" -i "$tmp/in.fa" -o "$tmp/o" "${args[@]}" --devices cpu 2>"$tmp/rerun.err" || fail "rerun exited $?"
grep -q "no queued item fits" "$tmp/rerun.err" && fail "nothing queued: $(grep queued "$tmp/rerun.err")"
grep -q "1 worker (auto): nothing is queued" "$tmp/rerun.err" || fail "nothing queued: not said"

# another model's config.json beside a checkpoint
mkdir "$tmp/ck" && cp "$srcdir/tests/data/tiny_a/pytorch_model.bin" "$tmp/ck/"
python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["hidden_size"] *= 2; json.dump(c, open(sys.argv[2], "w"))' \
	"$srcdir/tests/data/tiny_a/config.json" "$tmp/ck/config.json"
"$bin" plan -i "$tmp/in.fa" --weights "$tmp/ck/pytorch_model.bin" >/dev/null 2>"$tmp/ck.err"
rc=$?
[ $rc -eq 1 ] || fail "config.json that does not fit: exit $rc"
grep -q "does not fit the configuration of $tmp/ck/config.json" "$tmp/ck.err" ||
	fail "config.json that does not fit: $(head -c 300 "$tmp/ck.err")"

# a killed split run's fragments: removed by the rerun (here a whole fold)
for f in a.frag1-6.pdb a.frag7-12.pdb a.frag1-6.pae.json; do echo stale >"$tmp/o/$f"; done
echo keep >"$tmp/o/a.fragment.pdb"   # not of that form
"$bin" -i "$tmp/in.fa" -o "$tmp/o" "${args[@]}" --devices cpu --force 2>/dev/null || fail "--force rerun exited $?"
for f in a.frag1-6.pdb a.frag7-12.pdb a.frag1-6.pae.json; do
	[ -e "$tmp/o/$f" ] && fail "$f left after the rerun"
done
[ -e "$tmp/o/a.fragment.pdb" ] || fail "a.fragment.pdb removed"

# calibrate and a NAME.svg of someone else's
echo '<svg xmlns="http://www.w3.org/2000/svg"><text>mine</text></svg>' >"$tmp/q.svg"
cp "$tmp/q.svg" "$tmp/q.svg.orig"
cal() { "$bin" calibrate -q --weights "$srcdir/tests/data/tiny_a/weights.safetensors" --devices cpu \
	--lengths 8 --num-recycles 0 -o "$tmp/q.tsv" "$@" >/dev/null 2>"$tmp/cal.err"; }
cal
rc=$?
[ $rc -eq 1 ] && grep -q "q.svg: not a plot calibrate wrote" "$tmp/cal.err" ||
	fail "calibrate beside a foreign svg: exit $rc, $(head -c 300 "$tmp/cal.err")"
cmp -s "$tmp/q.svg" "$tmp/q.svg.orig" || fail "calibrate overwrote a foreign svg"
[ -e "$tmp/q.tsv" ] && fail "calibrate wrote its table beside a foreign svg"
cal --force || fail "calibrate --force: exit $?"
grep -q ">esmbatch calibrate: " "$tmp/q.svg" || fail "calibrate --force: no plot"
cal || fail "calibrate over its own plot: exit $?, $(head -c 300 "$tmp/cal.err")"
finish
