#!/usr/bin/env python3
"""Counts the SASS instructions of one trace's pass through a pstm kernel (sm_90, .maxnreg N).

Usage: scripts/pstm-sass-count.py KERNEL START STOP [TAKEN_ADDR ...] [--regs 80] [--ptx PATH] [--show]
  KERNEL: entry point (e.g. pstm_static8_dsr_smem); START: hex address where the walk starts (the
  trace-loop head: for the *_smem kernels the block of three LDS.128 walk-state loads before the
  per-trace BAR.SYNC; for the others the candidate-header LDG.E.128 block); STOP: hex address(es),
  comma-separated, that end one iteration (the loop head); TAKEN_ADDR: predicated branches to take.
The kernel is extracted from the embedded PTX with `.maxnreg` (as the driver does), assembled with
ptxas -arch=sm_90 and disassembled with nvdisasm (pip nvidia-cuda-nvcc). One path is followed:
BRA.DIV not taken (converged warp); a predicated branch is taken when its fall-through reaches a
CALL within 6 instructions (the sqrt/division slow paths), when it has a second predicate (the
batched all-FAST unit skipping the per-layer path), when it follows `FSETP.GT.AND Pn, ...` as
`@!Pn BRA` (the stretch-mute test of a live step end), or when listed; other predicated branches
fall through. Print the path with --show and list more TAKEN addresses until it is the intended one
(docs/notes/pstm.md, "Counted issue limit": the addresses used for each kernel at that commit).
"""
import collections, os, re, subprocess, sys, tempfile

def nvidia_bin(tool):
    import nvidia
    for d in nvidia.__path__:
        for sub in ("cu13/bin", "cuda_nvcc/bin"):
            p = os.path.join(d, sub, tool)
            if os.path.exists(p):
                return p
    return tool

def extract(ptx, name, regs):
    lines = ptx.split("\n")
    hdr = [l for l in lines if l.lstrip().startswith((".version", ".target", ".address_size", ".extern .shared"))]
    i = lines.index(".visible .entry %s(" % name)
    close = next(k for k in range(i, len(lines)) if lines[k] == ")")
    end = next(k for k in range(close, len(lines)) if lines[k] == "}")
    return "\n".join(hdr + lines[i:close + 1] + [".maxnreg %d" % regs] + lines[close + 1:end + 1]) + "\n"

def parse(sass):
    ins, labels, pend = [], {}, []
    for l in sass.split("\n"):
        s = l.strip()
        m = re.match(r"^(\.L_x_\d+):", s)
        if m:
            pend.append(m.group(1))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", l)
        if m:
            a = int(m.group(1), 16)
            for p in pend:
                labels[p] = a
            pend = []
            ins.append((a, m.group(2).strip()))
    return ins, labels

def main():
    args = sys.argv[1:]
    regs, ptx_path, show = 80, "target/ptx/seisgpu-kernels.ptx", False
    if "--regs" in args:
        k = args.index("--regs"); regs = int(args[k + 1]); del args[k:k + 2]
    if "--ptx" in args:
        k = args.index("--ptx"); ptx_path = args[k + 1]; del args[k:k + 2]
    if "--show" in args:
        args.remove("--show"); show = True
    name, start, stops = args[0], int(args[1], 16), {int(x, 16) for x in args[2].split(",")}
    taken = {int(x, 16) for x in args[3:]}
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "k.ptx")
        open(p, "w").write(extract(open(ptx_path).read(), name, regs))
        out = subprocess.run([nvidia_bin("ptxas"), "-arch=sm_90", "-v", p, "-o", os.path.join(d, "k.cubin")],
                             capture_output=True, text=True, check=True)
        sys.stderr.write(out.stderr)
        sass = subprocess.run([nvidia_bin("nvdisasm"), "-c", os.path.join(d, "k.cubin")], capture_output=True, text=True,
                              check=True).stdout
    ins, labels = parse(sass)
    prev = None
    for a, t in ins:
        if re.match(r"@!?P\d BRA P\d, ", t):
            taken.add(a)
        m = re.match(r"@!(P\d) BRA", t)
        if m and prev and re.match(r"FSETP.GT.AND %s, PT, R\d+, R\d+, PT" % m.group(1), prev):
            taken.add(a)
        prev = t
    idx = {a: i for i, (a, _) in enumerate(ins)}
    i, path = idx[start], []
    while len(path) < 20000:
        a, t = ins[i]
        if path and (a in stops or a == start):
            break
        path.append((a, t))
        m = re.match(r"(@!?U?P\w+\s+)?BRA\s+.*?`\((\.L_x_\d+)\)", t)
        if m and "BRA.DIV" not in t:
            if m.group(1) is None or a in taken or any("CALL" in x for _, x in ins[i + 1:i + 7]):
                i = idx[labels[m.group(2)]]
                continue
        if t.startswith("EXIT"):
            break
        i += 1
    if show:
        for a, t in path:
            print("%05x %s" % (a, t))
    ops = collections.Counter((t.split()[1] if t.startswith("@") else t.split()[0]) for _, t in path)
    print("%s: %d instructions per trace; LDS.64 %d, LDG.E.64 %d, MUFU.RSQ %d" % (name, len(path), ops["LDS.64"],
          ops["LDG.E.64.CONSTANT"], ops["MUFU.RSQ"]))

if __name__ == "__main__":
    main()
