#!/bin/sh
# test_func_length.sh - short functions and small files in src/: no function
# longer than 100 lines (from its opening '{' line to its closing '}' line),
# but torch_pickle_run's opcode switch (io/torch_pickle.c); no file longer
# than 1,000 lines.  The CUDA kernels (kernels/) are not in src/.
# A function is a '{' at column 0 after a line at column 0 that names it
# before a '(' (the house style); its length runs to the next '}' at column 0.
# `tests/test_func_length.sh -l` lists every function, longest first.
# Prints each function and file over its limit; exit 1 if any.
. "${srcdir:-.}/tests/lib.sh"
max_func=100
max_file=1000
# functions allowed to be longer (FILE:NAME): the unpickler's one switch
allow=" io/torch_pickle.c:torch_pickle_run "

# LENGTH FILE:LINE FILE:NAME for each function of src/
for f in "$srcdir"/src/*.c "$srcdir"/src/*/*.c "$srcdir"/src/*/*.h; do
	awk -v f="${f#"$srcdir"/src/}" '
		/^[A-Za-z_].*\(/ && !/;[ \t]*$/ {
			s = $0; sub(/\(.*/, "", s); n = split(s, w, /[ \t*]+/)
			name = w[n]; at = NR }
		/^\{/ && name != "" { start = NR; next }
		/^\}/ && start { print NR - start + 1, f ":" at, f ":" name; start = 0; name = "" }
		/;[ \t]*$/ && !start { name = "" }' "$f"
done | sort -k1,1nr > "$tmp/funcs"

if [ "${1:-}" = -l ]; then
	cat "$tmp/funcs"
	exit 0
fi

[ -s "$tmp/funcs" ] || fail "no functions found in $srcdir/src"
while read -r len at name; do
	[ "$len" -gt "$max_func" ] || break
	case $allow in *" $name "*) continue ;; esac
	echo "src/$at: ${name#*:} is $len lines (over $max_func)"
done < "$tmp/funcs" > "$tmp/long"
[ -s "$tmp/long" ] && fail "$(grep -c . "$tmp/long") function(s) too long:
$(cat "$tmp/long")"

for f in $(find "$srcdir/src" -type f -name '*.[ch]'); do
	n=$(wc -l < "$f")
	[ "$n" -gt "$max_file" ] && echo "${f#"$srcdir"/}: $n lines (over $max_file)"
done > "$tmp/big"
[ -s "$tmp/big" ] && fail "$(grep -c . "$tmp/big") file(s) too long:
$(cat "$tmp/big")"

echo "$(grep -c . "$tmp/funcs") functions checked"
finish
