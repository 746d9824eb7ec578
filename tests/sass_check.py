#!/usr/bin/env python3
"""sass_check.py - reads `cuobjdump -sass` output of the CUDA kernels and
judges each kernel at the instruction level (used by tests/test_sass.sh and
bench/gpu_model).

Per kernel (a SASS function): its instructions, its loops (each backward
branch closes the loop [target, branch]), and
  - local memory: any LDL / STL (register spills or local arrays);
  - generic memory: any LD / ST without a state space (LDG / STG global,
    LDS / STS / LDSM shared): the compiler lost the address space, as it
    does for shared memory reached through a pointer rebuilt from an
    integer; the kernels take global data through their parameters, which
    compile to LDG / STG, so a generic access is taken to be shared memory;
  - the main loop: the instructions of the loops holding HMMA, less those
    of the loops nested in them without HMMA (data movement whose trip
    count the caller knows), and its HMMA share.

The main loop's instructions are those of its fast path: the shortest
cycle (in instructions) through its header, which skips what a branch
may skip (the next tile's prefetch on the last tile, the 4-byte copy and
rotary paths), so the share is an upper bound of the per-iteration one.

Usage: sass_check.py SASS_FILE [--check REGEX[=SHARE]] ... : prints one
line per kernel; exits 1 when a kernel whose (mangled or demangled) name
matches a REGEX uses local memory or generic loads / stores, or, where it
has HMMA, its main loop's HMMA share is under SHARE (default 1/8; the
first matching REGEX holds).
"""
import re
import sys
import collections

INSN = re.compile(r'^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;')


def parse(text):
    """{kernel: [(address, opcode, text)]} of a cuobjdump -sass listing"""
    kernels, cur = {}, None
    for line in text.splitlines():
        m = re.match(r'\s*Function : (\S+)', line)
        if m:
            cur = kernels.setdefault(m.group(1), [])
            continue
        m = INSN.match(line)
        if m and cur is not None:
            body = re.sub(r'^@!?U?P\w+\s+', '', m.group(2))
            op = body.split()[0] if body.split() else ''
            cur.append((int(m.group(1), 16), op, body))
    return kernels


def base(op):
    return op.split('.')[0]


def blocks(ins):
    """the basic blocks of a kernel: [(first, last)] indices into ins, and
    succ: {block: [blocks]}"""
    addr = {a: i for i, (a, _, _) in enumerate(ins)}
    starts = {0}
    for i, (a, op, body) in enumerate(ins):
        if base(op) in ('BRA', 'EXIT', 'RET', 'BRX', 'JMP'):
            starts.add(i + 1)
            m = re.search(r'0x([0-9a-f]+)', body)
            if base(op) == 'BRA' and m and int(m.group(1), 16) in addr:
                starts.add(addr[int(m.group(1), 16)])
    starts = sorted(x for x in starts if x < len(ins))
    bl = [(s, (starts[k + 1] if k + 1 < len(starts) else len(ins)) - 1) for k, s in enumerate(starts)]
    of = {s: k for k, (s, _) in enumerate(bl)}
    succ = {}
    for k, (s, e) in enumerate(bl):
        a, op, body = ins[e]
        out = []
        cond = body.startswith('@')
        m = re.search(r'0x([0-9a-f]+)', body)
        if base(op) == 'BRA' and m and int(m.group(1), 16) in addr:
            out.append(of[addr[int(m.group(1), 16)]])
        if (base(op) not in ('BRA', 'EXIT', 'RET', 'BRX', 'JMP') or cond) and k + 1 < len(bl):
            out.append(k + 1)
        succ[k] = out
    return bl, succ


def natural_loops(bl, succ):
    """[(header, body)] of the back edges u -> h (h not after u)"""
    pred = collections.defaultdict(list)
    for u, vs in succ.items():
        for v in vs:
            pred[v].append(u)
    out = []
    for u, vs in succ.items():
        for h in vs:
            if h > u:
                continue
            body, stack = {h, u}, [u]
            while stack:
                x = stack.pop()
                if x == h:
                    continue
                for p in pred[x]:
                    if p not in body:
                        body.add(p)
                        stack.append(p)
            out.append((h, body))
    return out


def main_loop(ins):
    """the main loop's fast path (see the top): the instructions of the
    shortest cycle through the header of the loop with HMMA, or []"""
    import heapq
    bl, succ = blocks(ins)
    size = [e - s + 1 for s, e in bl]
    hmma = lambda b: any(base(ins[i][1]) == 'HMMA' for i in range(bl[b][0], bl[b][1] + 1))
    cand = [(h, body) for h, body in natural_loops(bl, succ) if any(hmma(b) for b in body)]
    if not cand:
        return []
    h, body = max(cand, key=lambda hb: len(hb[1]))
    # Dijkstra from h around to h within the body, weights the block sizes
    dist, prev, q = {h: size[h]}, {}, [(size[h], h)]
    best, last = None, None
    while q:
        d, x = heapq.heappop(q)
        if d > dist.get(x, 1 << 60):
            continue
        for y in succ[x]:
            if y not in body:
                continue
            if y == h:
                if best is None or d < best:
                    best, last = d, x
                continue
            nd = d + size[y]
            if nd < dist.get(y, 1 << 60):
                dist[y], prev[y] = nd, x
                heapq.heappush(q, (nd, y))
    path, x = [], last
    while x is not None and x != h:
        path.append(x)
        x = prev.get(x)
    path.append(h)
    return [ins[i] for b in reversed(path) for i in range(bl[b][0], bl[b][1] + 1)]


def judge(name, ins, minshare=1.0 / 8):
    """(line, failures) for one kernel"""
    ops = collections.Counter(op for _, op, _ in ins)
    local = sum(n for op, n in ops.items() if base(op) in ('LDL', 'STL'))
    generic = sum(n for op, n in ops.items() if base(op) in ('LD', 'ST'))
    hmma = sum(n for op, n in ops.items() if base(op) == 'HMMA')
    ml = main_loop(ins)
    mh = sum(1 for _, op, _ in ml if base(op) == 'HMMA')
    fails = []
    if local:
        fails.append('%d local-memory loads / stores' % local)
    if generic:
        fails.append('%d generic loads / stores' % generic)
    share = mh / len(ml) if ml else 0.0
    if hmma and share < minshare:
        fails.append('main loop HMMA share %.3f < %.3f' % (share, minshare))
    line = '%-60s %6d insns, %3d HMMA, local %d, generic %d, main loop %d insns %d HMMA (%.3f)' % (
        name[:60], len(ins), hmma, local, generic, len(ml), mh, share)
    return line, fails


def demangle(name):
    m = re.match(r'_Z\d+(\w+?)I', name)
    return m.group(1) if m else name


def main(argv):
    if len(argv) < 2:
        sys.stderr.write('usage: sass_check.py SASS_FILE [--check REGEX] ...\n')
        return 2
    checks = []
    for i in range(2, len(argv) - 1):
        if argv[i] == '--check':
            rx, _, share = argv[i + 1].partition('=')
            checks.append((re.compile(rx), float(eval(share, {})) if share else 1.0 / 8))
    kernels = parse(open(argv[1]).read())
    bad = 0
    for name, ins in sorted(kernels.items()):
        hit = [sh for c, sh in checks if c.search(name) or c.search(demangle(name))]
        line, fails = judge(name, ins, hit[0] if hit else 1.0 / 8)
        checked = bool(hit)
        verdict = ('FAIL: ' + '; '.join(fails)) if checked and fails else ('ok' if checked else '-')
        print('%s  %s' % (line, verdict))
        bad += checked and bool(fails)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
