#!/usr/bin/env bash
# test_cli.sh - esmbatch's command line: help, version, exit codes of usage
# errors, fatal input errors, partial runs and `plan` output.
# Run by `make check` from the build directory; finds the binary through
# $ESMBATCH (default ./esmbatch) and the sources through $srcdir.
. "${srcdir:-.}/tests/lib.sh"
fx=$srcdir/tests/data/fasta
ref=$srcdir/buckets/reference-pytorch-rtx5090.tsv
unset ESMBATCH_WEIGHTS

# expect CODE DESCRIPTION -- command...: checks the exit status; stdout and
# stderr are left in $tmp/out and $tmp/err
expect() {
	local want=$1 what=$2; shift 3
	"$@" >"$tmp/out" 2>"$tmp/err"
	local got=$?
	if [ "$got" -ne "$want" ]; then
		echo "FAIL: $what: exit $got, expected $want: $*"
		sed 's/^/  stderr: /' "$tmp/err" | head -5
		fails=$((fails + 1))
	else
		echo "ok: $what (exit $got)"
	fi
}
# has FILE TEXT DESCRIPTION
has() {
	if ! grep -qF -- "$2" "$1"; then
		echo "FAIL: $3: '$2' not in $(basename "$1")"
		fails=$((fails + 1))
	fi
}
empty() {
	if [ -s "$1" ]; then
		echo "FAIL: $2: $(basename "$1") not empty:"; head -3 "$1"
		fails=$((fails + 1))
	fi
}
lines() {   # FILE N DESCRIPTION: exactly N lines
	local n; n=$(wc -l <"$1")
	if [ "$n" -ne "$2" ]; then
		echo "FAIL: $3: $n lines, expected $2"; cat "$1"
		fails=$((fails + 1))
	fi
}

[ -x "$bin" ] || { echo "no binary at $bin"; exit 99; }

# --- help and version: stdout, exit 0 ---
expect 0 "--help" -- "$bin" --help
has "$tmp/out" "Usage: esmbatch" "--help"; has "$tmp/out" "Exit status" "--help"
empty "$tmp/err" "--help"
expect 0 "-h" -- "$bin" -h
has "$tmp/out" "Usage: esmbatch" "-h"
expect 0 "plan --help" -- "$bin" plan --help
has "$tmp/out" "Usage: esmbatch" "plan --help"
expect 0 "--version" -- "$bin" --version
has "$tmp/out" "esmbatch " "--version"; empty "$tmp/err" "--version"
expect 0 "version" -- "$bin" version
has "$tmp/out" "esmbatch " "version"

# --- usage errors: stderr, exit 2 ---
expect 2 "no arguments" -- "$bin"
empty "$tmp/out" "no arguments"; has "$tmp/err" "no input" "no arguments"
expect 2 "unknown command" -- "$bin" frobnicate
has "$tmp/err" "unknown command 'frobnicate'" "unknown command"
expect 2 "unknown option" -- "$bin" plan --frobnicate -i "$fx/good.fa"
has "$tmp/err" "unknown option --frobnicate" "unknown option"
expect 2 "unknown short option" -- "$bin" plan -Z -i "$fx/good.fa"
expect 2 "missing argument" -- "$bin" plan -i
has "$tmp/err" "needs an argument" "missing argument"
expect 2 "stray argument" -- "$bin" plan -i "$fx/good.fa" extra
expect 2 "plan without -i" -- "$bin" plan
expect 2 "fold without -o" -- "$bin" fold -i "$fx/good.fa" --weights w.st
has "$tmp/err" "-o DIR" "fold without -o"
expect 2 "fold without weights" -- "$bin" -i "$fx/good.fa" -o "$tmp/o"
has "$tmp/err" "ESMBATCH_WEIGHTS" "fold without weights"
expect 2 "bad --precision" -- "$bin" plan -i "$fx/good.fa" --precision fp8
if "$bin" --version | grep -q '^onednn: no'; then   # bf16 on the CPU needs oneDNN
	expect 2 "bf16 on the CPU" -- "$bin" -i "$fx/good.fa" -o "$tmp/o" --weights w.st --devices cpu \
		--precision bf16
	has "$tmp/err" "computes in fp32 only" "bf16 on the CPU"
else
	expect 2 "fp16 on the CPU" -- "$bin" -i "$fx/good.fa" -o "$tmp/o" --weights w.st --devices cpu \
		--precision fp16
	has "$tmp/err" "computes in fp32 or bf16 only" "fp16 on the CPU"
fi
expect 2 "fp16 on a sim: card" -- "$bin" -i "$fx/good.fa" -o "$tmp/o" --weights w.st \
	--devices sim:1G --precision fp16
has "$tmp/err" "computes in fp32 or bf16 only" "fp16 on a sim: card"
expect 2 "bad --chunk-size" -- "$bin" plan -i "$fx/good.fa" --chunk-size -3
expect 2 "non-numeric --chunk-size" -- "$bin" plan -i "$fx/good.fa" --chunk-size 12x
expect 2 "bad --num-recycles" -- "$bin" plan -i "$fx/good.fa" --num-recycles -2
expect 2 "bad --threads" -- "$bin" plan -i "$fx/good.fa" --threads many
expect 2 "empty --names" -- "$bin" plan -i "$fx/good.fa" --names ""
expect 2 "calibrate without weights" -- "$bin" calibrate
has "$tmp/err" "ESMBATCH_WEIGHTS" "calibrate without weights"

# --- fatal input errors: one line on stderr, exit 1 ---
for f in no-such-file.fa corrupt.fa.gz truncated.fa.gz truncated.fa.bgz; do
	expect 1 "plan on $f" -- "$bin" plan -i "$fx/$f"
	has "$tmp/err" "$f" "plan on $f names the file"
	grep -v warning "$tmp/err" >"$tmp/err1"; lines "$tmp/err1" 1 "plan on $f: one error line"
	empty "$tmp/out" "plan on $f"
done
expect 1 "fold on a missing file" -- "$bin" -i "$fx/no-such-file.fa" -o "$tmp/o" --weights "$tmp/none.st"
expect 1 "missing quota table" -- "$bin" plan -i "$fx/good.fa" --quota-table "$tmp/none.tsv"
printf 'not a table\n' >"$tmp/bad.tsv"
expect 1 "malformed quota table" -- "$bin" plan -i "$fx/good.fa" --quota-table "$tmp/bad.tsv"
has "$tmp/err" "bad.tsv:1:" "malformed quota table names file and line"
expect 1 "missing names file" -- "$bin" plan -i "$fx/good.fa" --names "$tmp/none.txt"

# --- plan ---
expect 0 "plan good.fa" -- "$bin" plan -i "$fx/good.fa"
has "$tmp/out" "bucket	records	residues	longest	quota" "plan header"
has "$tmp/out" "512	5	79	26	-" "plan 512 row"
has "$tmp/out" "over	0	0	0	-" "plan over row"
has "$tmp/out" "failed	0	-	-	-" "plan failed row"
has "$tmp/out" "distinct	5	79	26	-" "plan distinct row"
lines "$tmp/out" 9 "plan rows"
expect 0 "plan from stdin (gzip)" -- sh -c "\"$bin\" plan -i - < \"$fx/good.fa.gz\""
has "$tmp/out" "512	5	79	26	-" "plan stdin"
expect 0 "plan with the reference quota table" -- "$bin" plan -i "$srcdir/data/example.fa" --quota-table "$ref"
has "$tmp/out" "512	5	238	76	15032385536" "plan quota 512"
has "$tmp/out" "1344	0	0	0	33285996544" "plan quota 1344"
expect 0 "plan -q is quiet" -- "$bin" plan -q -i "$fx/good.fa"
empty "$tmp/err" "plan -q"

# --- bad records: the run goes on (exit 3), or --strict stops it (exit 1) ---
expect 3 "plan bad.fa" -- "$bin" plan -i "$fx/bad.fa"
has "$tmp/out" "512	3	13	7	-" "plan bad.fa good records"
has "$tmp/out" "failed	18	-	-	-" "plan bad.fa failed records"
has "$tmp/err" "record 2 'digit': invalid character '7' at position 4" "plan bad.fa reason"
expect 1 "plan --strict bad.fa" -- "$bin" plan --strict -i "$fx/bad.fa"
has "$tmp/err" "--strict" "strict"
expect 1 "fold --strict bad.fa" -- "$bin" --strict -i "$fx/bad.fa" -o "$tmp/o" --weights "$tmp/none.st"
expect 3 "plan --names" -- "$bin" plan -i "$fx/bad.fa" --names "$fx/names.txt"
has "$tmp/out" "512	2	6	3	-" "plan --names records"
has "$tmp/err" "'nosuch' not found" "plan --names missing"

# --- small cases on the demo model: an empty --devices, --names, an empty
# FASTA, a quota table the CPU does not use ---
w=$demo
expect 2 "--devices with no device" -- "$bin" plan -i "$fx/good.fa" --devices ,,,
has "$tmp/err" "--devices: no device in ',,,'" "--devices ,,, reason"
# the index column is the position in the input, also with --names
printf 'seq3\nmissing\nseq1\n' >"$tmp/pick.txt"
expect 3 "fold --names" -- "$bin" -q -i "$fx/good.fa" --names "$tmp/pick.txt" -o "$tmp/pick" \
	--weights "$w" --num-recycles 0
[ "$(cut -f1,2 "$tmp/pick/summary.tsv" | tail -n +2 | tr '\t\n' ': ')" = "0:seq1 2:seq3 -:missing " ] ||
	{ echo "FAIL: --names index column: $(cut -f1,2 "$tmp/pick/summary.tsv" | tr '\t\n' ': ')"; fails=$((fails + 1)); }
# an empty FASTA: exit 0, with a warning
: >"$tmp/empty.fa"
expect 0 "fold on an empty FASTA" -- "$bin" -i "$tmp/empty.fa" -o "$tmp/emptyout" --weights "$w"
has "$tmp/err" "empty.fa: no records" "fold on an empty FASTA warns"
# a quota table the CPU's auto chunk does not use: a warning
expect 0 "plan, quota table on the CPU" -- "$bin" plan -i "$fx/good.fa" --weights "$w" \
	--devices cpu --quota-table "$ref"
has "$tmp/err" "quota table: not used on the CPU with --chunk-size 0" "quota table on the CPU warns"

# --- weights from the environment satisfy fold's check ---
expect 1 "fold, weights from env, missing input" -- \
	env ESMBATCH_WEIGHTS="$tmp/none.st" "$bin" -i "$fx/no-such-file.fa" -o "$tmp/o"

if [ "$fails" -ne 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "all CLI checks passed"
