#!/usr/bin/env bash
# test_input.sh - hostile inputs to the reading side: a .fai that would
# make htslib divide by zero, endless lines (names file, quota table,
# done.jsonl, run.jsonl, summary.tsv) also under a memory limit, SIGTERM
# while the input is read (endless devices, a slow pipe, a FIFO with no
# writer) and a FIFO config.json beside the weights.
. "${srcdir:-.}/tests/lib.sh"
fx=$srcdir/tests/data/fasta
unset ESMBATCH_WEIGHTS
none=$tmp/none.st   # never opened: these runs end before the weights

# run CODE WHAT TEXT -- command...: exit status CODE and TEXT in stderr
run() {
	local want=$1 what=$2 text=$3; shift 4
	"$@" >"$tmp/out" 2>"$tmp/err"
	local got=$?
	if [ "$got" -ne "$want" ]; then
		fail "$what: exit $got, expected $want"
		sed 's/^/  stderr: /' "$tmp/err" | head -3
	elif ! grep -qF -- "$text" "$tmp/err"; then
		fail "$what: '$text' not in stderr: $(head -2 "$tmp/err")"
	else
		echo "ok: $what"
	fi
}

# --- a .fai is checked before htslib reads through it ---
printf '>a\nMKVLA\n>b\nGSHMS\n' >"$tmp/t.fa"
printf 'b\n' >"$tmp/b.txt"
printf 'a\t5\t3\t5\t6\nb\t5\t12\t0\t0\n' >"$tmp/t.fa.fai"   # line width 0
run 0 "plan, .fai line width 0" "is stale (line 2:" -- "$bin" plan -i "$tmp/t.fa" --names "$tmp/b.txt"
grep -q "^512	1	5	5" "$tmp/out" || fail "plan, .fai line width 0: record b not planned"
printf 'a\t5\t3\t5\t6\n' >"$tmp/t.fa.fai"                  # newer, but b missing
run 0 "plan, .fai missing the last record" "the file has more than the index describes" -- \
	"$bin" plan -i "$tmp/t.fa" --names "$tmp/b.txt"
grep -q "^512	1	5	5" "$tmp/out" || fail "plan, .fai missing a record: record b not planned"

# --- lines are bounded; out of memory is an error, not the end of a file ---
lim=(prlimit --as=$((1 << 30)) --)   # 1 GiB of address space
if ! ${lim[@]+"${lim[@]}"} "$bin" --version >/dev/null 2>&1; then
	echo "note: $bin does not start within 1 GiB of address space (a sanitizer build?): no limit"
	lim=()
fi
run 1 "--names /dev/zero" "/dev/zero:1: line longer than 1048576 bytes" -- \
	${lim[@]+"${lim[@]}"} "$bin" plan -i "$fx/good.fa" --names /dev/zero
run 1 "--quota-table /dev/zero" "/dev/zero:1: line longer than 1048576 bytes" -- \
	${lim[@]+"${lim[@]}"} "$bin" plan -i "$fx/good.fa" --quota-table /dev/zero
python3 -c 'import sys; sys.stdout.write("x" * (1 << 21) + "\n")' >"$tmp/long.txt"
run 1 "--names, a 2 MiB line" "long.txt:1: line longer than" -- \
	"$bin" plan -i "$fx/good.fa" --names "$tmp/long.txt"
# the journals of an output directory
printf '>a\nMKVLAG\n' >"$tmp/one.fa"
"$bin" -q -i "$tmp/one.fa" -o "$tmp/o" --weights "$demo" --num-recycles 0 ||
	fail "the fold for the journal tests"
cp "$tmp/o/done.jsonl" "$tmp/done.keep"
cat "$tmp/long.txt" >>"$tmp/o/done.jsonl"
run 1 "done.jsonl, a 2 MiB line" "done.jsonl:2: line longer than" -- \
	"$bin" -i "$tmp/one.fa" -o "$tmp/o" --weights "$none"
cp "$tmp/done.keep" "$tmp/o/done.jsonl"
cat "$tmp/long.txt" >>"$tmp/o/run.jsonl"
run 1 "report, run.jsonl with a 2 MiB line" "run.jsonl:" -- "$bin" report -o "$tmp/o"
grep -qF "line longer than" "$tmp/err" || fail "report, run.jsonl: no 'line longer than'"
# a summary.tsv with a 2 MiB line; an endless one (a link to /dev/zero) is
# refused as a link before it is read (atomic_file.h's rule)
mkdir -p "$tmp/l" "$tmp/z"
cp "$tmp/long.txt" "$tmp/l/summary.tsv"
run 1 "report, summary.tsv with a 2 MiB line" "summary.tsv:1: line longer than" -- \
	timeout 60 ${lim[@]+"${lim[@]}"} "$bin" report -o "$tmp/l"
ln -s /dev/zero "$tmp/z/summary.tsv"
run 1 "report, summary.tsv is /dev/zero" "summary.tsv: exists and is a symbolic link" -- \
	timeout 60 ${lim[@]+"${lim[@]}"} "$bin" report -o "$tmp/z"

# --- SIGTERM while the input is read: out within 2 s, interrupted (exit 1) ---
# term WHAT -- command...: sends SIGTERM after 1 s
term() {
	local what=$1 pid t0 t1 rc; shift 2
	"$@" 2>"$tmp/err" &
	pid=$!
	sleep 1
	t0=$(date +%s%N)
	kill -TERM "$pid"
	for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	t1=$(date +%s%N)
	if kill -0 "$pid" 2>/dev/null; then
		fail "$what: still running 3 s after SIGTERM"
		kill -KILL "$pid"
		wait "$pid"
		return
	fi
	wait "$pid"
	rc=$?
	echo "$what: out $(( (t1 - t0) / 1000000 )) ms after SIGTERM, exit $rc"
	[ $(( (t1 - t0) / 1000000 )) -le 2000 ] || fail "$what: not out within 2 s"
	[ "$rc" -eq 1 ] || fail "$what: exit $rc, expected 1"
	grep -qF "interrupted" "$tmp/err" || fail "$what: no 'interrupted' in: $(tail -1 "$tmp/err")"
}
term "fold -i /dev/urandom" -- "$bin" -q -i /dev/urandom -o "$tmp/t1" --weights "$none"
term "fold -i /dev/zero" -- "$bin" -i /dev/zero -o "$tmp/t2" --weights "$none"
mkfifo "$tmp/slow"
(printf '>a\nMKV\n'; sleep 20) >"$tmp/slow" &
slow=$!
term "fold -i - on a slow pipe" -- sh -c "exec \"$bin\" -i - -o \"$tmp/t3\" --weights \"$none\" <\"$tmp/slow\""
kill "$slow" 2>/dev/null
mkfifo "$tmp/nowriter.fa"
term "fold -i FIFO without a writer" -- "$bin" -i "$tmp/nowriter.fa" -o "$tmp/t4" --weights "$none"

# --- a config.json that is not a regular file is refused, at once ---
mkdir -p "$tmp/w"
cp "$demo" "$tmp/w/m.safetensors"
mkfifo "$tmp/w/config.json"
run 1 "a FIFO config.json" "config.json: cannot read config: not a regular file" -- \
	timeout 10 "$bin" plan -i "$fx/good.fa" --weights "$tmp/w/m.safetensors"
finish
