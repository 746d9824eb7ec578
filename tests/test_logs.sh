#!/usr/bin/env bash
# test_logs.sh - logs a cluster user can read:
# - into a file (a Slurm log) every line leads with its local time, and
#   each record's line names k/N; ESMBATCH_LOG_TIME=0 leaves the time out;
# - "progress:" lines come while a record is under way, not only after it
#   ends (ESMBATCH_PROGRESS_EVERY; a slow output step, slowio:MS);
# - the CPU's grant in the progress line is not 0.0 once a record ran;
# - SIGTERM says in one line how many records it left not folded, also
#   with -q, not one warning per record;
# - on a terminal (a pty of 70 columns, two sim devices) the live line
#   never reaches the last column, no redraw starts a new row, and the
#   ETA reads in h/m/s;
# - an interval that is not a number of seconds is a warning naming it.
. "${srcdir:-.}/tests/lib.sh"
args=(--weights "$demo" --num-recycles 0 -t 1)
stamp='^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} esmbatch: (error|warning|info|debug): '

# --- a log file: stamped lines, [k/N] per record, progress, the CPU's grant ---
mkfa 41 "$tmp/three.fa" a=30 b=20 c=12
ESMBATCH_FAULT=slowio:1200 ESMBATCH_PROGRESS_EVERY=0.25 "$bin" -i "$tmp/three.fa" -o "$tmp/o" \
	"${args[@]}" --devices cpu 2>"$tmp/o.err" || fail "fold exited $?"
n=$(wc -l <"$tmp/o.err")
[ "$n" -gt 5 ] && [ "$(grep -cE "$stamp" "$tmp/o.err")" -eq "$n" ] ||
	fail "not every line stamped: $(grep -vE "$stamp" "$tmp/o.err" | head -3)"
for k in 1 2 3; do
	grep -qE "$stamp\[$k/3\] [abc]: ok, [0-9]+ residues on cpu, mean pLDDT" "$tmp/o.err" ||
		fail "no record line [$k/3]: $(grep -F "[$k/" "$tmp/o.err")"
done
# before the first record's line (its output step takes 1.2 s): progress
sed -n '/\[1\/3\]/q;/progress: 0\/3 records/p' "$tmp/o.err" >"$tmp/early"
[ "$(wc -l <"$tmp/early")" -ge 2 ] || fail "no progress while the first record ran: $(grep -c progress: "$tmp/o.err") lines"
grep 'progress: [123]/3 records' "$tmp/o.err" | grep -q ', cpu \(peak \)\?0\.0/' &&
	fail "the CPU's grant reads 0.0 after a record: $(grep 'progress: 3/3' "$tmp/o.err")"
grep -q 'progress: 3/3 records in [0-9]*s, [0-9]* residues/s, ETA 0s, cpu peak [0-9.]*/' "$tmp/o.err" ||
	fail "no final progress line: $(grep progress: "$tmp/o.err" | tail -1)"
ESMBATCH_LOG_TIME=0 "$bin" -i "$tmp/three.fa" -o "$tmp/o" "${args[@]}" --devices cpu 2>"$tmp/nt.err" ||
	fail "ESMBATCH_LOG_TIME=0: exited $?"
grep -qv '^esmbatch: ' "$tmp/nt.err" && fail "ESMBATCH_LOG_TIME=0: $(grep -v '^esmbatch: ' "$tmp/nt.err" | head -1)"
grep -q '^esmbatch: info: ' "$tmp/nt.err" || fail "ESMBATCH_LOG_TIME=0: no info line"

for v in ESMBATCH_PROGRESS_EVERY ESMBATCH_REPORT_EVERY; do
	env ESMBATCH_LOG_TIME=0 "$v=5x" "$bin" -i "$tmp/three.fa" -o "$tmp/o" "${args[@]}" --devices cpu --force \
		2>"$tmp/bad.err" || fail "$v=5x: exited $?"
	[ "$(grep -cx "esmbatch: warning: $v=5x: not a number of seconds in \[0, 1e+06\]; [0-9.]* used" "$tmp/bad.err")" = 1 ] ||
		fail "$v=5x: not one warning naming it: $(grep -c "$v" "$tmp/bad.err") lines"
done

# --- SIGTERM with -q: one line counting the records not started ---
mkfa 42 "$tmp/many.fa" $(for i in $(seq 40); do echo "m$i=10"; done)
ESMBATCH_FAULT=slowio:300 "$bin" -q -i "$tmp/many.fa" -o "$tmp/t" "${args[@]}" --devices cpu 2>"$tmp/t.err" &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/t/done.jsonl" ] && break; sleep 0.1; done
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 1 ] || fail "SIGTERM: exit $rc"
[ "$(wc -l <"$tmp/t.err")" -eq 1 ] && grep -qE "$stamp"'interrupted: [0-9]+ record\(s\) not folded' "$tmp/t.err" ||
	fail "SIGTERM: $(wc -l <"$tmp/t.err") lines: $(head -3 "$tmp/t.err")"
ns=$(sed -n 's/.*interrupted: \([0-9]*\) record.*/\1/p' "$tmp/t.err")
nf=$(grep -c 'interrupted before it ran' "$tmp/t/summary.partial.tsv")
[ "${ns:-x}" = "$nf" ] && [ "$nf" -gt 0 ] || fail "SIGTERM: said $ns not started, summary has $nf"

# --- a terminal of 70 columns, two sim devices ---
mkfa 43 "$tmp/mix.fa" r0=30 r1=120 r2=45 r3=200 r4=60 r5=15
COLUMNS=200 ESMBATCH_FAULT=slowio:200 ESMBATCH_PROGRESS_EVERY=0.1 python3 - "$tmp/pty.out" "$bin" -q \
	-i "$tmp/mix.fa" -o "$tmp/p" "${args[@]}" --devices sim:12M,sim:8M --workers 2 <<'PY' ||
import fcntl, os, pty, struct, sys, termios
out, argv = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 70, 0, 0))
data = b""
while True:
    try:
        b = os.read(fd, 65536)
    except OSError:
        break
    if not b:
        break
    data += b
_, st = os.waitpid(pid, 0)
open(out, "wb").write(data)
sys.exit(os.waitstatus_to_exitcode(st))
PY
	fail "pty run exited $?"
python3 - "$tmp/pty.out" >"$tmp/pty.check" <<'PY' || fail "the live line at 70 columns: $(cat "$tmp/pty.check")"
import re, sys
data = open(sys.argv[1], "rb").read().decode()
text = data.replace("\x1b[K", "")
bad = []
if "\x1b" in text:
    bad.append("other escapes: %r" % text[text.index("\x1b"):][:20])
rows = re.split(r"[\r\n]", text)
draws = [r for r in rows if re.search(r"\d+/\d+ records", r)]
if len(draws) < 3:
    bad.append("%d redraws" % len(draws))
long = [r for r in rows if len(r) >= 70]
if long:
    bad.append("%d rows of 70 or more: %r" % (len(long), long[0]))
if "\n" in text.rstrip("\r\n"):
    bad.append("a new row: %r" % text[:200])
for r in draws:
    m = re.search(r"ETA ([^,]*)", r)
    if m and m.group(1) not in ("-", "") and not re.fullmatch(r"(\d+h\d\dm|\d+m\d\ds|\d+s)", m.group(1)):
        bad.append("ETA %r" % m.group(1))
print("; ".join(bad))
sys.exit(1 if bad else 0)
PY
finish
