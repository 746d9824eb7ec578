#!/bin/sh
# test_layers.sh - includes in src/ point only down the layers
# (docs/hacking.md, Layout): a file may include its own folder and the
# folders below it.  Each file's first line names it, a header's with its
# prefix ("/* name.h (prefix x_) - ..."), and a header's include guard is
# derived from its path (src/model/esm2.h: ESMBATCH_MODEL_ESM2_H).  A
# source file's includes come as: config.h, its own header, the system's
# and libraries' <...>, then the project's by layer (checked: its own
# header first after config.h, no <...> after a project header).
# Prints every include that points up or sideways, every first line,
# guard and include order that does not match; exit 1 if any.
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
nh=0
for f in "$top"/*.[ch] "$top"/*/*.[ch]; do
	name=$(basename "$f") rel=${f#$top/}
	case $f in
	*.h) first="^/\* $name .*(prefix [^)]*" ;;
	*) first="^/\* $name " ;;
	esac
	head -n 1 "$f" | grep -q "$first" || { echo "first line of $rel does not name it: $(head -n 1 "$f")"; bad=1; }
	case $f in *.h) ;; *) continue ;; esac
	nh=$((nh + 1))
	want=ESMBATCH_$(echo "$rel" | tr 'a-z/.' 'A-Z__')
	# the first #ifndef and the line after it, which defines the same name
	guard=$(awk '/^#ifndef / { g = $2; getline; if ($0 != "#define " g) g = g " (not defined next)"; print g; exit }' "$f")
	if [ "$guard" != "$want" ]; then
		echo "include guard of $rel: ${guard:-none}, not $want"
		bad=1
	fi
done
[ "$nh" -gt 0 ] || { echo "no headers found under $top"; exit 1; }
nc=0
for f in "$top"/*/*.c; do
	rel=${f#$top/} own=${f#$top/}
	own=${own%.c}.h
	nc=$((nc + 1))
	msg=$(awk -v own="$own" -v ownh="$( [ -f "$top/$own" ] && echo 1)" '
		n && !/^(#|$)/ { exit }   # the leading block only
		/^#include/ && $2 != "\"config.h\"" {
			n++
			if (n == 1 && ownh && $2 != "\"" own "\"") { print "its own header is not its first include"; exit }
			if ($2 ~ /^"/ && $2 != "\"" own "\"") proj = 1
			else if (proj) { print "<" substr($2, 2) " after a project header"; exit }
		}' "$f")
	[ -z "$msg" ] || { echo "include order of $rel: $msg"; bad=1; }
done
echo "$nc source files' include order checked"
echo "$nh headers' first lines and include guards checked"
exit $bad
