#!/usr/bin/env bash
# test_make_pipeline.sh - contrib/make/Makefile (GNU make) on the demo
# model, as a genome-annotation pipeline is run:
# - `make` folds the proteins into out/summary.tsv, then confident.tsv;
#   `make` again has nothing to do and runs no esmbatch;
# - more proteins, the run interrupted by SIGINT to esmbatch (its output
#   step slowed, ESMBATCH_FAULT=slowio): make fails, no out/summary.tsv
#   (not the earlier complete run's either), out/summary.partial.tsv with
#   the interrupted rows; `make` then folds only the rest, and
#   out/summary.tsv has every protein with a final outcome and no partial
#   table beside it;
# - the same with Ctrl-C as a terminal sends it, to make's whole process
#   group (make gets it before esmbatch has written anything);
# - the last `make` again has nothing to do.
. "${srcdir:-.}/tests/lib.sh"
top=$(cd "$srcdir" && pwd)
mkf=$top/contrib/make/Makefile
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
# esmbatch as make runs it: each call's PID (esmbatch's: exec) in calls
cat >"$tmp/esmbatch" <<SH
#!/bin/sh
echo \$\$ >>"$tmp/calls"
exec "$bin" "\$@"
SH
chmod +x "$tmp/esmbatch"
: >"$tmp/calls"
mkdir "$tmp/w" && cd "$tmp/w" || exit 99
# make, not the make of `make check` (its flags, its level)
mk() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL LC_ALL=C make -f "$mkf" ESMBATCH="$tmp/esmbatch" \
		WEIGHTS="$top/data/demo/esmfold_demo.safetensors" PROTEINS=proteins.faa OUT=out \
		MIN_PLDDT=0 ESMBATCH_FLAGS="-q --devices cpu --num-recycles 0 -t 1" "$@"
}
calls() { wc -l <"$tmp/calls"; }
lines() { cat "$1" 2>/dev/null | wc -l; }
# genome N: proteins.faa of N proteins (the first ones the same each time)
genome() {
	local a=() i
	for ((i = 1; i <= $1; i++)); do a+=("gene$i=$((30 + i * 7 % 40))"); done
	mkfa 41 proteins.faa "${a[@]}"
}
# final N WHAT: out/summary.tsv has N rows, each a final outcome (here
# ok), and no partial table is beside it
final() {
	[ -f out/summary.tsv ] || { fail "$2: no out/summary.tsv"; return; }
	[ "$(tail -n +2 out/summary.tsv | wc -l)" -eq "$1" ] ||
		fail "$2: $(tail -n +2 out/summary.tsv | wc -l) rows, expected $1"
	[ "$(tail -n +2 out/summary.tsv | cut -f6 | sort -u)" = ok ] ||
		fail "$2: not every row ok: $(cut -f2,6,7 out/summary.tsv | tr '\t\n' ' |' | head -c 400)"
	[ -e out/summary.partial.tsv ] && fail "$2: out/summary.partial.tsv left beside summary.tsv"
	[ "$(tail -n +2 confident.tsv | wc -l)" -eq "$1" ] || fail "$2: confident.tsv not rebuilt"
}
# nothing WHAT: make has nothing to do, runs no esmbatch
nothing() {
	local c0
	c0=$(calls)
	mk >"$tmp/again.log" 2>&1 || fail "$1: make exited $?"
	grep -q "Nothing to be done for 'all'" "$tmp/again.log" ||
		fail "$1: make had work: $(head -c 300 "$tmp/again.log")"
	[ "$(calls)" -eq "$c0" ] || fail "$1: esmbatch run again"
	mk -q || fail "$1: make -q says out of date"
}
# interrupted WHAT: after an interrupted make, no summary.tsv, the partial
# table has every row and some interrupted ones; make has work
interrupted() {
	[ -e out/summary.tsv ] && fail "$1: out/summary.tsv there after the interrupted run"
	[ "$(tail -n +2 out/summary.partial.tsv 2>/dev/null | wc -l)" -eq "$2" ] ||
		fail "$1: out/summary.partial.tsv: not $2 rows"
	grep -q 'interrupted before it ran' out/summary.partial.tsv 2>/dev/null ||
		fail "$1: no interrupted row (the run ended before the signal? test too slow)"
	mk -q && fail "$1: make -q says up to date"
}
# wait_done N: until out/done.jsonl has N lines (at most 120 s)
wait_done() {
	local i=0
	while [ "$(lines out/done.jsonl)" -lt "$1" ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i + 1)); done
}

# --- make; make again ----------------------------------------------------
genome 5
mk >"$tmp/1.log" 2>&1 || fail "make: exited $?: $(tail -5 "$tmp/1.log")"
[ "$(calls)" -eq 1 ] || fail "make: esmbatch run $(calls) times"
final 5 "make"
nothing "make again"

# --- more proteins; SIGINT to esmbatch; make completes ----------------------
genome 11
ESMBATCH_FAULT=slowio:1500 mk >"$tmp/2.log" 2>&1 &
pid=$!
wait_done 6
kill -INT "$(tail -1 "$tmp/calls")"
wait $pid && fail "SIGINT to esmbatch: make exited 0"
interrupted "SIGINT to esmbatch" 11
done2=$(lines out/done.jsonl)
mk >"$tmp/3.log" 2>&1 || fail "make after SIGINT: exited $?: $(tail -5 "$tmp/3.log")"
final 11 "make after SIGINT"
[ "$(grep -c '"event":"skip"' out/run.jsonl)" -eq "$done2" ] ||
	fail "make after SIGINT: not the $done2 proteins done before skipped"

# --- more proteins; Ctrl-C: SIGINT to make's process group ------------------
genome 17
set -m   # the job in its own process group, SIGINT not ignored
ESMBATCH_FAULT=slowio:1500 mk >"$tmp/4.log" 2>&1 &
pid=$!
set +m
wait_done 12
kill -INT -- "-$pid"
wait $pid && fail "Ctrl-C: make exited 0"
# make may end before esmbatch has written its table: wait for esmbatch
e=$(tail -1 "$tmp/calls") i=0
while kill -0 "$e" 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
kill -0 "$e" 2>/dev/null && fail "Ctrl-C: esmbatch still running 60 s after it"
interrupted "Ctrl-C" 17
mk >"$tmp/5.log" 2>&1 || fail "make after Ctrl-C: exited $?: $(tail -5 "$tmp/5.log")"
final 17 "make after Ctrl-C"
nothing "make after the reruns"
finish
