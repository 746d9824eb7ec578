#!/bin/sh
# test_idioms.sh - one idiom each in src/: a label named fail: is reached
# only by failures (the success path ends before it, or jumps to done:/out:).
# A chunk's row count is trunk_chunk()/trunk_rows() (model/trunk.h), the
# recycle bins one constant, not an expression or a number written again;
# an array grows by grow_array() (util/grow.h), not a realloc block of its own.
# Prints each offending line; exit 1 if any.
. "${srcdir:-.}/tests/lib.sh"
for f in "$srcdir"/src/*/*.c; do
	# falling in from another failure label (oom: into fail:) is a failure too
	awk -v f="${f#$srcdir/}" '
		/^}/ { label = "" }
		/^fail:/ && prev !~ /^\t(return|goto)[ ;]|^}/ && (label == "" || label ~ /^(done|out):/) {
			print f ":" NR ": success falls into fail: (after: " prev ")" }
		/^[a-z_]+:$/ { label = $0 }
		!/^[ \t]*$/ { prev = $0 }' "$f"
done > "$tmp/falls"
[ -s "$tmp/falls" ] && fail "fail: labels on the success path:
$(cat "$tmp/falls")"
grep -rnE '([a-zA-Z_]+) - ([a-z0-9_]+) < ([a-z_]+) \? \1 - \2 : \3|chunk > 0 && chunk < ' \
	"$srcdir"/src/model "$srcdir"/src/compute | grep -v '/model/trunk\.h:' > "$tmp/chunk"
[ -s "$tmp/chunk" ] && fail "chunk lengths written out instead of trunk_chunk()/trunk_rows():
$(cat "$tmp/chunk")"
grep -rnE '([a-z_>.-]+) \? 2 \* \1 : [0-9]' "$srcdir"/src > "$tmp/grow"
[ -s "$tmp/grow" ] && fail "arrays grown by hand instead of grow_array():
$(cat "$tmp/grow")"
n=$(grep -rhE '^#define [A-Z_]*RECYCLE_BINS ' "$srcdir"/src | wc -l)
[ "$n" -eq 1 ] || fail "$n recycle-bin constants in src/ (want one)"
finish
