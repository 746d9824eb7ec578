#!/usr/bin/env bash
# test_input_ranges.sh - numbers from the user out of range: sizes that no
# integer holds (--cpu-memory, sim:SIZE), a quota table's header numbers,
# and one physical device named twice in --devices; each refused with one
# line and the usage exit (2) or, for a file, the fatal one (1).  Run
# under clang's -fsanitize=float-cast-overflow by .ci/run as well.
. "${srcdir:-.}/tests/lib.sh"
fa=$srcdir/data/example.fa
unset ESMBATCH_WEIGHTS

# refused CODE TEXT DESCRIPTION -- command...: exit CODE, one stderr line
# holding TEXT
refused() {
	local want=$1 text=$2 what=$3 got; shift 4
	"$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	[ "$got" -eq "$want" ] || fail "$what: exit $got, expected $want: $(head -3 "$tmp/err")"
	grep -qF -- "$text" "$tmp/err" || fail "$what: '$text' not in: $(head -3 "$tmp/err")"
	[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$what: $(wc -l <"$tmp/err") stderr lines"
}

# --- sizes: non-finite, negative, beyond 1 PiB ---
for v in 1e300 nan inf -1e300 1e18 0x1p70 2000000G; do
	refused 2 "--cpu-memory: expected a size from 1 byte to 1048576G" "--cpu-memory $v" -- \
		"$bin" plan -i "$fa" --cpu-memory "$v"
	refused 2 "--devices sim:$v: expected sim:SIZE" "sim:$v" -- \
		"$bin" plan -i "$fa" --devices "sim:$v"
done
"$bin" plan -q -i "$fa" --cpu-memory 1048576G >/dev/null || fail "--cpu-memory 1048576G (1 PiB) refused"
"$bin" plan -q -i "$fa" --devices sim:1.5G,sim:1G >/dev/null || fail "sim:1.5G,sim:1G refused"

# --- a quota table's header numbers ---
hdr='#esmbatch-quota	v1	device=sim:2G	precision=auto	weights=x	safety=1.15'
rows='max_len	peak_allocated	peak_reserved	device_used	quota
512	1000	2000	-	3000'
for kv in worker_overhead=9223372036854775807 worker_overhead=-1 worker_overhead=1e9 \
          seconds_per_cost=nan seconds_per_cost=-1 chunk_size=99999999; do
	printf '%s\t%s\n%s\n' "$hdr" "$kv" "$rows" >"$tmp/q.tsv"
	refused 1 "q.tsv:1: ${kv%%=*} must be" "quota table $kv" -- \
		"$bin" plan -i "$fa" --weights "$demo" --devices sim:2G --quota-table "$tmp/q.tsv"
done
printf '%s\tworker_overhead=4096\n%s\n' "$hdr" "$rows" >"$tmp/q.tsv"
"$bin" plan -q -i "$fa" --weights "$demo" --devices sim:2G --quota-table "$tmp/q.tsv" >/dev/null ||
	fail "quota table worker_overhead=4096 refused"

# --- one physical device named twice: refused; sim: cards are separate ---
refused 2 "the cpu device is named twice" "--devices cpu,cpu" -- \
	"$bin" plan -i "$fa" --weights "$demo" --devices cpu,cpu
refused 2 "the cpu device is named twice" "--devices cpu,sim:1G,cpu" -- \
	"$bin" -i "$fa" -o "$tmp/o" --weights "$demo" --devices cpu,sim:1G,cpu
[ -e "$tmp/o" ] && fail "--devices cpu,cpu: the output directory was made"
refused 2 "CUDA device 0 is named twice" "--devices cuda,cuda:0" -- \
	"$bin" plan -i "$fa" --devices cuda,cuda:0
refused 2 "CUDA device 1 is named twice" "--devices cuda:1,cuda:01" -- \
	"$bin" plan -i "$fa" --devices cuda:1,cuda:01
refused 2 "--devices cuda:x: expected cpu, cuda, cuda:N or sim:SIZE" "--devices cuda:x" -- \
	"$bin" plan -i "$fa" --devices cuda:x
"$bin" plan -i "$fa" --weights "$demo" --devices sim:1G,sim:1G >"$tmp/out" 2>/dev/null ||
	fail "--devices sim:1G,sim:1G refused"
[ "$(grep -c '^sim:1G	1072' "$tmp/out")" -eq 2 ] || fail "sim:1G,sim:1G: not two cards of 1 GiB each"

finish
