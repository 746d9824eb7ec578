#!/usr/bin/env bash
# test_install.sh - `make install` into a temporary prefix: the binary,
# the manual page (groff finds no error in it), the example FASTA, the demo
# model and the quota tables; the installed esmbatch, run from a directory
# outside the source and build trees, folds the installed example with the
# installed demo model, every ATOM record as the build tree's binary folds
# it; `make uninstall` leaves no file behind.
. "${srcdir:-.}/tests/lib.sh"
: "${TOP_BUILDDIR:?run by make check}" "${MAKE:=make}"
p=$tmp/prefix
$MAKE -C "$TOP_BUILDDIR" install prefix="$p" >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log"; fail "make install: exited $?"; finish; }
share=$p/share/esmbatch
for f in bin/esmbatch share/man/man1/esmbatch.1 share/esmbatch/example.fa \
	share/esmbatch/demo/esmfold_demo.safetensors share/esmbatch/demo/config.json \
	share/esmbatch/demo/README share/esmbatch/buckets/README; do
	[ -s "$p/$f" ] || fail "not installed: $f"
done
if command -v groff >/dev/null; then
	groff -man -ww -z "$p/share/man/man1/esmbatch.1" >"$tmp/groff.err" 2>&1 &&
		[ ! -s "$tmp/groff.err" ] || fail "esmbatch.1: $(head -3 "$tmp/groff.err")"
	for s in NAME SYNOPSIS COMMANDS OPTIONS 'EXIT STATUS' FILES ENVIRONMENT EXAMPLES; do
		grep -q "^\.SH \"*$s" "$p/share/man/man1/esmbatch.1" || fail "esmbatch.1: no $s section"
	done
fi

mkdir "$tmp/elsewhere"
(cd "$tmp/elsewhere" && env -u ESMBATCH_WEIGHTS "$p/bin/esmbatch" -q -i "$share/example.fa" -o out \
	--weights "$share/demo/esmfold_demo.safetensors" --devices cpu --num-recycles 0) ||
	fail "the installed esmbatch: exited $?"
n=$(grep -c '^>' "$share/example.fa")
[ "$(tail -n +2 "$tmp/elsewhere/out/summary.tsv" | cut -f6 | grep -c '^ok$')" -eq "$n" ] ||
	fail "installed example: not $n records ok"
"$bin" -q -i "$srcdir/data/example.fa" -o "$tmp/built" --weights "$demo" --devices cpu \
	--num-recycles 0 || fail "the built esmbatch: exited $?"
for f in "$tmp/built"/*.pdb; do
	cmp -s <(grep '^ATOM' "$f") <(grep '^ATOM' "$tmp/elsewhere/out/$(basename "$f")") ||
		fail "installed example: $(basename "$f") differs from the build tree's"
done

$MAKE -C "$TOP_BUILDDIR" uninstall prefix="$p" >"$tmp/uninstall.log" 2>&1 || fail "make uninstall: exited $?"
left=$(find "$p" -type f | head -5)
[ -z "$left" ] || fail "make uninstall left: $left"
finish
