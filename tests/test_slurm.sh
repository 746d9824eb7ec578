#!/usr/bin/env bash
# test_slurm.sh - contrib/slurm on a real one-node Slurm cluster, started
# by this test as its own processes (munged, slurmctld, slurmd; SlurmUser
# the current user; state, spool, sockets, logs and free ports of its own
# in a temporary directory; stopped at the end).  A 4-task array of
# esmbatch.sbatch (--shard auto, the CPU) over a mixed-length FASTA with the
# demo model, and esmbatch-merge.sbatch after it (--dependency=afterok);
# task 2 is sent SIGTERM mid-run (scancel --signal=TERM --batch), requeues
# itself and finishes.  The merged summary.tsv (less its timing and memory
# columns) and every PDB's ATOM records equal a single-process run's.
# First, without Slurm: the scripts set --gpus, --mem and --time (the
# merge --mem and --time) and say how to size them from esmbatch plan.
# Skipped (77) where slurmctld, slurmd or munged is not installed.
. "${srcdir:-.}/tests/lib.sh"
# the scripts ask for what a cluster sizes a job by, with the sizing told
sb=$srcdir/contrib/slurm
for o in gpus mem time; do
	grep -Eq "^#SBATCH --$o=[0-9]" "$sb/esmbatch.sbatch" || fail "esmbatch.sbatch: no #SBATCH --$o"
	grep -Eq "^#  --$o " "$sb/esmbatch.sbatch" || fail "esmbatch.sbatch: no word on sizing --$o"
done
for o in mem time; do
	grep -Eq "^#SBATCH --$o=[0-9]" "$sb/esmbatch-merge.sbatch" || fail "esmbatch-merge.sbatch: no #SBATCH --$o"
done
grep -q 'esmbatch plan' "$sb/esmbatch.sbatch" || fail "esmbatch.sbatch: sizing says nothing of esmbatch plan"
[ "$fails" -eq 0 ] || finish
PATH=$PATH:/usr/sbin:/sbin
for c in munged munge slurmctld slurmd sbatch scontrol scancel squeue; do
	if ! command -v "$c" >/dev/null; then
		echo "SKIP: $c not installed (Debian: apt-get install slurm-wlm munge)"
		exit 77
	fi
done
sl=$tmp/slurm
mkdir -p "$sl/munge" "$sl/state" "$sl/spool" "$sl/log" "$sl/out"
chmod 700 "$sl/munge"
pids=
stop_daemons() {
	local p
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	pids=
}
trap 'stop_daemons; rm -rf "$tmp"' EXIT
# die MSG: what the daemons said, then fail and end
die() {
	fail "$*"
	for f in "$sl"/log/*; do echo "== $f"; tail -n 15 "$f"; done
	finish
}

# --- munge ------------------------------------------------------------------
head -c 1024 /dev/urandom >"$sl/munge/key"
chmod 400 "$sl/munge/key"
munged -F -f --key-file="$sl/munge/key" --socket="$sl/munge/sock" --pid-file="$sl/munge/pid" \
	--log-file="$sl/log/munged.log" --seed-file="$sl/munge/seed" >"$sl/log/munged.out" 2>&1 &
pids="$pids $!"
i=0
until munge -S "$sl/munge/sock" -n </dev/null >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -lt 100 ] || die "munged did not start"; sleep 0.1
done

# --- slurm.conf: one node, this user, free ports ------------------------------
read -r p1 p2 < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
host=$(hostname -s)
user=$(id -un)
ncpu=$(nproc)
cat >"$sl/slurm.conf" <<CONF
ClusterName=esmbatchtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=$user
SlurmdUser=$user
SlurmctldPort=$p1
SlurmdPort=$p2
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sl/munge/sock,cred_expire=10
StateSaveLocation=$sl/state
SlurmdSpoolDir=$sl/spool
SlurmctldPidFile=$sl/slurmctld.pid
SlurmdPidFile=$sl/slurmd.pid
SlurmctldLogFile=$sl/log/slurmctld.log
SlurmdLogFile=$sl/log/slurmd.log
PlugStackConfig=$sl/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
JobRequeue=1
KillWait=5
MinJobAge=3600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$ncpu RealMemory=1000 Gres=gpu:4 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
# four pretend GPUs (links to /dev/null, a character device as slurmd
# wants): esmbatch.sbatch's --gres=gpu:1 is granted as on a GPU node; the
# folds run on the CPU (--devices cpu)
mkdir "$sl/dev"
for g in 0 1 2 3; do ln -s /dev/null "$sl/dev/gpu$g"; done
echo "NodeName=$host Name=gpu File=$sl/dev/gpu[0-3]" >"$sl/gres.conf"
: >"$sl/plugstack.conf"
export SLURM_CONF=$sl/slurm.conf
slurmctld -D -f "$SLURM_CONF" >"$sl/log/slurmctld.out" 2>&1 &
pids="$pids $!"
slurmd -D -f "$SLURM_CONF" -N "$host" >"$sl/log/slurmd.out" 2>&1 &
pids="$pids $!"
i=0
until sinfo -h -o %t 2>/dev/null | grep -qx idle; do
	i=$((i + 1)); [ $i -lt 300 ] || die "the node did not come up: $(sinfo 2>&1)"; sleep 0.1
done

# --- the array, the merge, task 2 stopped and requeued ------------------------
mkfa 23 "$tmp/mix.fa" p0=70 p1=9 p2=44 p3=25 p4=58 p5=14 p6=33 p7=6 p8=49 p9=20 p10=38 p11=12 \
	p12=27 p13=63 p14=17 p15=30
opts=(--num-recycles 0 --devices cpu -t 2 -q)
"$bin" -i "$tmp/mix.fa" -o "$tmp/one" --weights "$demo" "${opts[@]}" || fail "single run: exited $?"
c=$srcdir/contrib/slurm
out=$sl/out/fold
export ESMBATCH=$bin ESMBATCH_WEIGHTS=$demo ESMBATCH_FAULT=slowio:3000
# (the node has 1000 MB: the scripts' --mem is for real nodes)
jid=$(sbatch --parsable --array=1-4 --cpus-per-task=1 --mem=200M -o "$sl/out/task-%a.log" \
	"$c/esmbatch.sbatch" "$tmp/mix.fa" "$out" "${opts[@]}") || die "sbatch: $jid"
mid=$(sbatch --parsable --dependency=afterok:"$jid" --mem=100M -o "$sl/out/merge.log" \
	"$c/esmbatch-merge.sbatch" "$out") || die "sbatch merge: $mid"
i=0
until [ "$(cat "$out/done.2-of-4.jsonl" 2>/dev/null | wc -l)" -ge 1 ]; do
	i=$((i + 1)); [ $i -lt 1200 ] || die "task 2 folded nothing"; sleep 0.1
done
# (slurmctld may answer "try again later" for an array task it did signal,
# and scancel then retries for minutes: it would signal the requeued task
# too; cut short, sent again only when the task's log has not shown it)
tid=$(squeue -h -j "${jid}_2" -o %A)
i=0
until grep -q 'CANCELLED AT\|interrupted' "$sl/out/task-2.log" 2>/dev/null; do
	[ $((i % 20)) -eq 0 ] && timeout 3 scancel --signal=TERM --batch "$tid" 2>>"$sl/log/scancel.err"
	i=$((i + 1)); [ $i -lt 120 ] || die "task 2 got no SIGTERM: $(cat "$sl/log/scancel.err")"
	sleep 0.5
done
t_term=$SECONDS
# every job ends (the merge last); MinJobAge keeps them visible to scontrol
state() { scontrol -o show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1; }
i=0
until [ "$(state "$mid")" = COMPLETED ]; do
	s=$(state "$mid")
	case $s in FAILED|CANCELLED|TIMEOUT|NODE_FAIL) die "the merge job: $s";; esac
	i=$((i + 1)); [ $i -lt 3000 ] || die "the merge job did not end ($s; $(squeue 2>&1))"
	sleep 0.2
done
echo "the array and the merge ended $((SECONDS - t_term)) s after the SIGTERM"
restarts=$(scontrol -o show job "${jid}_2" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
[ "${restarts:-0}" -ge 1 ] || fail "task 2 was not requeued (Restarts=${restarts:-?})"
[ "$(grep -c 'requeueing task 2' "$sl/out/task-2.log")" -eq 1 ] ||
	fail "task 2's log: not one requeue: $(cat "$sl/out/task-2.log")"
grep -q '"event":"skip"' "$out/run.2-of-4.jsonl" || fail "task 2's rerun skipped nothing it had done"
for k in 1 2 3 4; do
	[ "$(state "${jid}_$k")" = COMPLETED ] || fail "task $k: $(state "${jid}_$k")"
done

keep_cols() {
	awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) keep[i] = $i !~ /second|bytes|time|rss|memory/ }
	            { s = ""; for (i = 1; i <= NF; i++) if (keep[i]) s = s $i "\t"; print s }' "$1"
}
cmp -s <(keep_cols "$tmp/one/summary.tsv") <(keep_cols "$out/summary.tsv") ||
	fail "merged summary differs: $(diff <(keep_cols "$tmp/one/summary.tsv") <(keep_cols "$out/summary.tsv") | head -5)"
n=0
for f in "$tmp/one"/*.pdb; do
	n=$((n + 1))
	cmp -s <(grep '^ATOM' "$f") <(grep '^ATOM' "$out/$(basename "$f")") ||
		fail "$(basename "$f"): ATOM records differ from the single run's"
done
[ "$n" -eq 16 ] && [ "$(ls "$out" | grep -c '\.pdb$')" -eq 16 ] || fail "not 16 PDBs"
finish
