#!/usr/bin/env python3
"""Compares two plans (`mlc compile ... --emit=plan`) step by step, every
buffer operand resolved through its views to the buffer it lies in and its
byte offset there: two plans that differ only in how their views are
numbered or chained (a zero-offset view of a whole buffer) print
"identical". For changes that scripts/compare-packages.sh reports as plan
differences while the kernels stay byte-identical:

  python3 scripts/plan_steps.py /tmp/before/X.plan /tmp/after/X.plan
"""
import re,sys
def norm(path):
    out=[]; env={}
    for line in open(path):
        s=line.strip()
        m=re.match(r'(%\w+) = plan\.(bind|arena|view) (.*?) : (memref<[^>]*>)',s)
        if m:
            name,kind,rest,ty=m.groups()
            if kind=='view':
                mm=re.match(r'(%\w+)\[(-?\d+)\]',rest); src,off=mm.groups()
                r=env[src]; env[name]=(r[0],r[1]+int(off),ty)
            else:
                env[name]=((kind,rest),0,ty)
            continue
        def rep(mo):
            n=mo.group(0)
            if n in env: r=env[n]; return f"<{r[0]}+{r[1]}:{r[2]}>"
            return n
        out.append(re.sub(r'%\w+',rep,s))
    return out
a=norm(sys.argv[1]); b=norm(sys.argv[2])
import difflib
d=[l for l in difflib.unified_diff(a,b,lineterm='',n=0)]
print('\n'.join(d[:40])); print('identical' if not d else f'{len(d)} diff lines')
