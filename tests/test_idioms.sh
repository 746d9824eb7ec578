#!/bin/sh
# test_idioms.sh - one idiom each in src/: a label named fail: is reached
# only by failures (the success path ends before it, or jumps to done:/out:).
# Prints each label the line before it falls into; exit 1 if any.
# src/cli and src/sched are not checked yet (being restructured).
. "${srcdir:-.}/tests/lib.sh"
for f in "$srcdir"/src/*/*.c; do
	case $f in */src/cli/* | */src/sched/*) continue ;; esac
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
finish
