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
A persistent kernel's outermost loop with HMMA is its loop over row
tiles, whose fast path skips all the work; for such a kernel (:inner
below) every innermost loop holding HMMA (no loop with HMMA inside it:
each product loop, one per instantiation or unrolled remainder) is a main
loop, and the kernel's share is that of their fast paths together.
  - subroutine calls: any CALL, the compiler's out-of-line int64
    division / remainder and the slow path of an IEEE fp32 division,
    reported, and refused in kernels named by :nocall.
  - shared memory: a kernel that synchronises its block (BAR) shares data
    through shared memory, and must write it as such (STS, STSM, or
    LDGSTS: cp.async) and read it as such (LDS, LDSM); the counts are
    printed.
  - a tensor-core kernel held to a share above 0 must have HMMA at all
    (a kernel whose mma became scalar FMA has none, and no share to
    fall short of); with :ldsm, its main loop(s) take their fragments
    from shared memory by LDSM (ldmatrix) and read no global memory
    (LDG: operands not staged, fragments loaded from global memory).

Usage: sass_check.py SASS_FILE [--check REGEX[=SHARE][:inner][:nocall][:ldsm]]
... : prints one line per kernel; exits 1 when a kernel whose (mangled or
demangled) name matches a REGEX uses local memory or generic loads /
stores, or synchronises its block without shared loads and stores, or,
where SHARE > 0, has no HMMA or its main loop's HMMA share is under SHARE
(default 1/8; the first matching REGEX holds), or, with :nocall, calls a
subroutine, or, with :ldsm, its main loop has no LDSM or an LDG; and
when a REGEX names no kernel at all (a rule that no longer applies).
"""
import re
import sys
import collections

INSN = re.compile(r'^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;')


def parse(text):
    """{kernel: [(address, opcode, text with its predicate)]} of a
    cuobjdump -sass listing"""
    kernels, cur = {}, None
    for line in text.splitlines():
        m = re.match(r'\s*Function : (\S+)', line)
        if m:
            cur = kernels.setdefault(m.group(1), [])
            continue
        m = INSN.match(line)
        if m and cur is not None:
            body = m.group(2)   # with its predicate, if any
            words = re.sub(r'^@!?U?P\w+\s+', '', body).split()
            cur.append((int(m.group(1), 16), words[0] if words else '', body))
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
        cond = body.startswith('@') or op.startswith('BRA.DIV')   # taken only when diverged
        m = re.search(r'0x([0-9a-f]+)', body)
        if base(op) == 'BRA' and m and int(m.group(1), 16) in addr:
            out.append(of[addr[int(m.group(1), 16)]])
        if (base(op) not in ('BRA', 'EXIT', 'RET', 'BRX', 'JMP') or cond) and k + 1 < len(bl):
            out.append(k + 1)
        succ[k] = out
    return bl, succ


def dominators(bl, succ, pred):
    """{block: the set of blocks that dominate it} (from block 0)"""
    everything = set(range(len(bl)))
    dom = {b: set(everything) for b in everything}
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for b in range(1, len(bl)):
            ps = [dom[p] for p in pred[b]]
            new = (set.intersection(*ps) if ps else set()) | {b}
            if new != dom[b]:
                dom[b], changed = new, True
    return dom


def natural_loops(bl, succ):
    """[(header, body)] of the back edges u -> h (h dominates u: a jump
    back into code that does not enclose u, such as the divergent
    fallback of a shuffle returning to its converged path, is no loop)"""
    pred = collections.defaultdict(list)
    for u, vs in succ.items():
        for v in vs:
            pred[v].append(u)
    dom = dominators(bl, succ, pred)
    out = []
    for u, vs in succ.items():
        for h in vs:
            if h not in dom[u]:
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


def _shortest(src, dst, succ, size, body, h):
    """the blocks of a shortest path src -> dst inside body, through h only
    where h is dst, weights the block sizes, src excluded; None if none"""
    import heapq
    end = -1   # dst reached (dst may be src: the cycle back to h)
    dist, prev, q = {src: 0}, {}, [(0, src)]
    while q:
        d, x = heapq.heappop(q)
        if x == end:
            break
        if d > dist.get(x, 1 << 60):
            continue
        for y in succ[x]:
            if y not in body or (y == h and dst != h):
                continue
            z = end if y == dst else y
            nd = d + size[y]
            if nd < dist.get(z, 1 << 60):
                dist[z], prev[z] = nd, x
                heapq.heappush(q, (nd, z))
    if end not in prev:
        return None
    path, x = [dst], prev[end]
    while x != src:
        path.append(x)
        x = prev[x]
    return list(reversed(path))


def hmma_loop(bl, succ, has):
    """(header, body) of the largest loop holding HMMA (has(block, regex)),
    or None"""
    cand = [(h, body) for h, body in natural_loops(bl, succ) if any(has(b, r'^HMMA') for b in body)]
    return max(cand, key=lambda hb: len(hb[1])) if cand else None


def main_loop(ins, via=None):
    """the main loop's fast path (see the top): the instructions of the
    shortest cycle through the header of the loop with HMMA, or [];
    via (a regex): through every block with an instruction matching it,
    in address order, where such a cycle exists"""
    bl, succ = blocks(ins)
    size = [e - s + 1 for s, e in bl]
    has = lambda b, rx: any(re.search(rx, ins[i][1]) for i in range(bl[b][0], bl[b][1] + 1))
    hb = hmma_loop(bl, succ, has)
    if not hb:
        return []
    h, body = hb
    stops = sorted(b for b in body if via and b != h and has(b, via)) + [h]
    path, x = [h], h
    for y in stops:
        leg = _shortest(x, y, succ, size, body, h)
        if leg is None:
            return main_loop(ins) if via else []
        path += leg
        x = y
    path.pop()   # the header, reached again
    return [ins[i] for b in path for i in range(bl[b][0], bl[b][1] + 1)]


def inner_loops(ins):
    """the fast paths (as main_loop) of the innermost loops holding HMMA"""
    bl, succ = blocks(ins)
    size = [e - s + 1 for s, e in bl]
    has = lambda b: any(base(ins[i][1]) == 'HMMA' for i in range(bl[b][0], bl[b][1] + 1))
    cand = [(h, frozenset(body)) for h, body in natural_loops(bl, succ) if any(has(b) for b in body)]
    out = []
    for h, body in set(cand):
        if any(o < body for _, o in cand):
            continue
        leg = _shortest(h, h, succ, size, body, h)
        if leg is not None:
            leg.pop()
            out.append([ins[i] for b in [h] + leg for i in range(bl[b][0], bl[b][1] + 1)])
    return out


def judge(name, ins, minshare=1.0 / 8, inner=False, nocall=False, ldsm=False):
    """(line, failures) for one kernel"""
    ops = collections.Counter(base(op) for _, op, _ in ins)
    local = ops['LDL'] + ops['STL']
    generic = ops['LD'] + ops['ST']
    hmma, calls = ops['HMMA'], ops['CALL']
    sld, sst = ops['LDS'] + ops['LDSM'], ops['STS'] + ops['STSM'] + ops['LDGSTS']
    ml = [i for m in inner_loops(ins) for i in m] if inner else main_loop(ins)
    mops = collections.Counter(base(op) for _, op, _ in ml)
    mh = mops['HMMA']
    fails = []
    if local:
        fails.append('%d local-memory loads / stores' % local)
    if generic:
        fails.append('%d generic loads / stores' % generic)
    if ops['BAR'] and not (sld and sst):
        fails.append('block barriers without shared %s' % ('loads' if not sld else 'stores'))
    if nocall and calls:
        fails.append('%d subroutine calls' % calls)
    share = mh / len(ml) if ml else 0.0
    if minshare > 0 and not hmma:
        fails.append('no HMMA (held to an HMMA share of %.3f)' % minshare)
    elif hmma and share < minshare:
        fails.append('main loop HMMA share %.3f < %.3f' % (share, minshare))
    if ldsm and hmma and not mops['LDSM']:
        fails.append('main loop without LDSM')
    if ldsm and mops['LDG']:
        fails.append('main loop reads global memory (%d LDG)' % mops['LDG'])
    line = ('%-60s %6d insns, %3d HMMA, local %d, generic %d, calls %d, shared ld %d st %d, '
            'main loop%s %d insns %d HMMA %d LDSM (%.3f)') % (
        name[:60], len(ins), hmma, local, generic, calls, sld, sst, 's' if inner else '', len(ml), mh,
        mops['LDSM'], share)
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
            spec = argv[i + 1].split(':')
            rx, _, share = spec[0].partition('=')
            checks.append((re.compile(rx), (float(eval(share, {})) if share else 1.0 / 8,
                                            'inner' in spec[1:], 'nocall' in spec[1:], 'ldsm' in spec[1:])))
    kernels = parse(open(argv[1]).read())
    bad = 0
    for c, _ in checks:
        if not any(c.search(n) or c.search(demangle(n)) for n in kernels):
            print('--check %s: FAIL: names no kernel' % c.pattern)
            bad += 1
    for name, ins in sorted(kernels.items()):
        hit = [sh for c, sh in checks if c.search(name) or c.search(demangle(name))]
        line, fails = judge(name, ins, *(hit[0] if hit else (1.0 / 8,)))
        checked = bool(hit)
        verdict = ('FAIL: ' + '; '.join(fails)) if checked and fails else ('ok' if checked else '-')
        print('%s  %s' % (line, verdict))
        bad += checked and bool(fails)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
