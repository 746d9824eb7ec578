#!/bin/sh
# test_layers.sh - includes in src/ point only down the layers
# (docs/hacking.md, Layout): a file may include its own folder and the
# folders below it.
# Prints every include that points up or sideways; exit 1 if any.
top=${srcdir:-.}/src
order="util io protein backend compute model sched cli"
rank() { i=0; for l in $order; do [ "$l" = "$1" ] && { echo $i; return; }; i=$((i + 1)); done; echo 99; }
bad=0 n=0
for f in "$top"/*/*.[ch]; do
	dir=$(basename "$(dirname "$f")")
	r=$(rank "$dir")
	for inc in $(sed -n 's|^#include "\([a-z]*\)/.*|\1|p' "$f" | sort -u); do
		n=$((n + 1))
		if [ "$(rank "$inc")" -gt "$r" ]; then
			echo "upward include: ${f#$top/} includes $inc/"
			bad=1
		fi
	done
done
[ "$n" -gt 0 ] || { echo "no includes found under $top"; exit 1; }
echo "$n folder includes checked"
exit $bad
