#!/usr/bin/env bash
# test_life.sh - the life of a record, as src/cli/fold_run.h lists it:
# every function the list names is defined in the file it names, and the
# fold command's files call one way only (fold.c -> fold_out.c ->
# fold_dir.c -> fold_progress.c, fold_dedup.c between fold.c and
# fold_out.c: none calls a function defined in a file above it); the
# glossary of words for the ends of things (fold_run.h, after the life of
# a record) names what exists, and the names it retired are gone.
# Prints each name that is gone and each call that points up; exit 1 if any.
. "${srcdir:-.}/tests/lib.sh"
src=$srcdir/src

# defined FILE NAME: FILE defines function NAME (a line at column 0 that
# names it before a '(', and then a '{' line before any line ending in ';')
defined() {
	awk -v n="$2" '
		!want && $0 ~ "^[a-z_].*[ *]" n "\\(" && $0 !~ "^[ \t]" { want = 1 }
		want && /;[ \t]*$/ { want = 0; next }
		want && /^\{/ { found = 1; exit }
		END { exit !found }' "$1"
}

# the list: the lines after "The life of a record" up to the first that is
# not " *   NAME  FILE  ..."
list=$(awk '/The life of a record/ { on = 1; next }
	on && /^ \*   [a-z_]+ +[a-z]+\/[a-z_]+\.c / { print $2, $3; next }
	on { exit }' "$src/cli/fold_run.h")
n=$(echo "$list" | grep -c .)
[ "$n" -ge 10 ] || fail "fold_run.h: the life of a record lists $n functions, not 10 or more"
echo "$list" | while read -r name file; do
	[ -n "$name" ] || continue
	[ -f "$src/$file" ] || { echo "FAIL: life of a record: $file: no such file"; continue; }
	defined "$src/$file" "$name" || echo "FAIL: life of a record: $name is not defined in $file"
done > "$tmp/gone"
cat "$tmp/gone"
[ -s "$tmp/gone" ] && fail "$(grep -c . "$tmp/gone") name(s) of the life of a record gone"

# exported NAME...: the functions FILE defines for the others (not static)
exported() {
	sed -n 's/^[a-z_][a-z_ ]*[ *]\(fold_[a-z_]*\)(.*/\1/p' "$1" | sort -u |
		while read -r f; do defined "$1" "$f" && echo "$f"; done
}
for pair in "fold_out fold" "fold_dir fold" "fold_dir fold_out" "fold_progress fold" \
	"fold_progress fold_out" "fold_progress fold_dir" "fold_dedup fold" "fold_out fold_dedup" \
	"fold_dir fold_dedup" "fold_progress fold_dedup"; do
	set -- $pair
	for f in $(exported "$src/cli/$2.c"); do
		grep -n "\b$f(" "$src/cli/$1.c" | sed "s|^|FAIL: cli/$1.c calls $f of cli/$2.c: |"
	done
done > "$tmp/up"
cat "$tmp/up"
[ -s "$tmp/up" ] && fail "$(grep -c . "$tmp/up") call(s) up the fold files"
# the glossary: the lines after "the glossary:" of " *   WORD  NAME  ...";
# each NAME is a word of src/, and the names these words replaced are gone
gloss=$(awk '/the glossary:$/ { on = 1; next }
	on && /^ \*   [a-z]+ +[A-Za-z_]+ / { print $2, $3; next }
	on && /^ \*     / { next }
	on { exit }' "$src/cli/fold_run.h")
ng=$(echo "$gloss" | grep -c .)
[ "$ng" -ge 5 ] || fail "fold_run.h: the glossary has $ng words, not 5 or more"
echo "$gloss" | while read -r word name; do
	[ -n "$name" ] || continue
	grep -rqw --include='*.[ch]' "$name" "$src" || echo "FAIL: glossary: $word: $name is not in src/"
done > "$tmp/gloss"
for old in SCHED_DONE sched_done_fn FOLD_NEXT nunfinished fold_ended res_ended res_done plan_cmd_main; do
	grep -rnw --include='*.[ch]' "$old" "$src" | sed "s|^|FAIL: $old, a name the glossary retired: |"
done >> "$tmp/gloss"
cat "$tmp/gloss"
[ -s "$tmp/gloss" ] && fail "$(grep -c . "$tmp/gloss") glossary name(s) gone or retired names left"
echo "$n names in the life of a record and $ng words of the glossary checked"
finish
