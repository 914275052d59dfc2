"""Formats `ptxas -v` output as one line per kernel; exits 1 on an assembler error."""
import re
import sys

rows, err = [], False
props_of = None
for line in sys.stdin:
    m = re.search(r"Compiling entry function '(\w+)'", line)
    if m:
        rows.append({"name": m.group(1)})
    m = re.search(r"Function properties for (\w+)", line)
    if m:
        # Non-entry functions (panic paths) follow an entry's lines: do not credit their stack to it.
        props_of = m.group(1)
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and rows and props_of == rows[-1]["name"]:
        rows[-1].update(stack=m.group(1), st=m.group(2), ld=m.group(3))
    m = re.search(r"Used (\d+) registers", line)
    if m and rows:
        rows[-1]["regs"] = m.group(1)
        s = re.search(r"(\d+) bytes smem", line)
        rows[-1]["smem"] = s.group(1) if s else "0"
    if "error" in line.lower():
        print(line.rstrip())
        err = True
hdr = ("kernel", "regs", "stack B", "spill st B", "spill ld B", "static smem B")
print("%-40s %5s %8s %11s %11s %14s" % hdr)
for r in sorted(rows, key=lambda r: r["name"]):
    print("%-40s %5s %8s %11s %11s %14s" % (r["name"], r.get("regs", "?"), r.get("stack", "?"),
          r.get("st", "?"), r.get("ld", "?"), r.get("smem", "0")))
sys.exit(1 if err or not rows else 0)
