#!/usr/bin/env python3
"""Counts the lines of every C++ function and file and lists the long ones.

    scripts/code_lengths.py SRC [--enforce DIR,...] [--report DIR,...]
                            [--allow PATH[:FUNCTION]]... [--max-function 150]
                            [--max-file 800]

A function over --max-function lines or a file over --max-file lines in an
--enforce folder is an error (exit 1) unless it is --allow'ed; an --allow
that no longer matches an offender is an error too, so the list of allowed
exceptions only shrinks. Offenders in --report folders are listed and do not
fail. Only .cpp and .h files count: ODS .td files and kernel sources for
the device (prelude/, .cuh, the CUDA emulator's emulation.h) are aside.

A function is a brace-delimited body whose head (the text since the last
`;`, `{` or `}` of the enclosing namespace or class) holds a `)`: free
functions, methods defined in a class, constructors with their initializer
lists, TEST(...) bodies. Its lines run from the head's first line to the
closing brace, comments and blank lines included; lambdas and local
classes count with the function that holds them. Comments, string and
character literals (raw strings too) are blanked before braces are read.
"""
import argparse
import os
import re
import sys


def blank(text):
    """`text` with comments and literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    keep = lambda s: ''.join('\n' if c == '\n' else ' ' for c in s)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(keep(text[i:j]))
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(keep(text[i:j]))
            i = j
        elif c == 'R' and text.startswith('"', i + 1) and not (i and (text[i - 1].isalnum() or text[i - 1] == '_')):
            m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(')' + m.group(1) + '"', i + m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + keep(text[i + 2:j]))
            i = j
        elif c in '"\'':
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum() \
                    and not text[i - 1].isalpha():
                out.append(' ')
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(c + keep(text[i + 1:j - 1]) + c if j - i >= 2 else keep(text[i:j]))
            i = j
        elif c == '#' and (i == 0 or text[i - 1] == '\n' or text[:i].rstrip(' \t').endswith('\n')):
            # A preprocessor line (and its continuations) holds no braces of code.
            j = i
            while True:
                k = text.find('\n', j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] != '\\':
                    break
                j = k + 1
            out.append(keep(text[i:k]))
            i = k
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def functions(text):
    """(name, first line, last line) of each function in C++ `text`."""
    code = blank(text)
    line_of = []
    line = 1
    for ch in code:
        line_of.append(line)
        if ch == '\n':
            line += 1
    found = []
    stack = []  # (kind, head start, head text) per open brace
    head_start = 0
    for i, ch in enumerate(code):
        if ch in ';':
            if not stack or stack[-1][0] == 'scope':
                head_start = i + 1
        elif ch == '{':
            inside = bool(stack) and stack[-1][0] in ('function', 'block', 'member')
            head = code[head_start:i]
            kind = 'block' if inside else classify(head)
            stack.append((kind, head_start, head))
            if not inside and kind != 'member':
                head_start = i + 1
        elif ch == '}':
            if not stack:
                continue
            kind, start, head = stack.pop()
            if kind == 'function':
                s = start
                while True:  # the head's first line: past blanks and `public:`
                    while s < i and code[s].isspace():
                        s += 1
                    m = re.match(r'(public|private|protected)\s*:(?!:)', code[s:i])
                    if not m:
                        break
                    s += m.end()
                found.append((name_of(head), line_of[s], line_of[i]))
            if (not stack or stack[-1][0] == 'scope') and kind != 'member':
                head_start = i + 1
    return found


def classify(head):
    """What a brace opened at namespace or class scope after `head` begins."""
    h = ' '.join(head.split())
    if re.search(r'\bnamespace\b', h) or re.fullmatch(r'.*\bextern\s*""\s*', h):
        return 'scope'
    h2 = re.sub(r'\boperator\s*(\(\)|[^\s(]+)', 'operator', h)
    # A constructor's initializer list: a member's braces (`: a(1), b{2} {`)
    # open before the body's.
    close = h2.find(')')
    if close >= 0 and re.search(r'(?<!:):(?!:)', h2[close:]) and re.search(r'[\w>]$', h2):
        return 'member'
    if ')' in h2:
        first_paren = h2.find('(')
        if '=' in h2[:first_paren] and not re.search(r'\b(requires|template)\b', h2[:first_paren]):
            return 'block'  # an initializer: `auto f = [](...) {`, `x = f(...) {`
        return 'function'
    if re.search(r'\b(class|struct|union|enum)\b', h2):
        return 'scope'
    return 'block'  # an initializer list, a brace-initialized variable


def name_of(head):
    h = ' '.join(head.split())
    h = re.sub(r'^((public|private|protected)\s*:(?!:)\s*)+', '', h)
    h = re.sub(r'^template\s*<.*?>\s*', '', h)
    m = re.search(r'((?:[\w~]+::)*(?:operator\s*(?:\(\)|[^\s(]+)|[\w~]+))\s*\(', h)
    if not m:
        return h[:60]
    name = m.group(1)
    if name.isupper() or re.fullmatch(r'[A-Z_0-9]+', name):  # TEST(Suite, Name)
        end = h.find(')', m.end())
        return h[m.start(1):end + 1]
    return name


def sources(root, folder):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
        dirnames[:] = sorted(d for d in dirnames if d != 'prelude')
        for f in sorted(filenames):
            if f.endswith(('.cpp', '.h')) and f != 'emulation.h':
                yield os.path.relpath(os.path.join(dirpath, f), root)


def offenders(root, folder, max_function, max_file):
    """(path, function or '', lines) of each file and function over the limits."""
    found = []
    for path in sources(root, folder):
        text = open(os.path.join(root, path), encoding='utf-8', errors='replace').read()
        lines = text.count('\n') + (0 if text.endswith('\n') or not text else 1)
        if lines > max_file:
            found.append((path, '', lines))
        for name, first, last in functions(text):
            if last - first + 1 > max_function:
                found.append((path, name, last - first + 1))
    return found


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('src', help='the source tree')
    p.add_argument('--enforce', default='', help='folders whose offenders fail, comma-separated')
    p.add_argument('--report', default='', help='folders whose offenders are listed only')
    p.add_argument('--allow', action='append', default=[], metavar='PATH[:FUNCTION]',
                   help='an offender allowed for now (a file, or one function of it)')
    p.add_argument('--max-function', type=int, default=150)
    p.add_argument('--max-file', type=int, default=800)
    a = p.parse_args()
    split = lambda s: [x for x in s.split(',') if x]
    for folder in split(a.enforce) + split(a.report):
        if not os.path.isdir(os.path.join(a.src, folder)):
            sys.exit(f'code_lengths.py: no folder {folder} in {a.src}')
    allowed = set(a.allow)
    used = set()
    errors = 0
    for folder, enforced in [(f, True) for f in split(a.enforce)] + \
                            [(f, False) for f in split(a.report)]:
        for path, fn, lines in offenders(a.src, folder, a.max_function, a.max_file):
            key = f'{path}:{fn}' if fn else path
            what = (f'{path}: function {fn} is {lines} lines (at most {a.max_function})' if fn
                    else f'{path}: {lines} lines (at most {a.max_file})')
            if not enforced:
                print(f'reported: {what}')
            elif key in allowed:
                used.add(key)
                print(f'allowed: {what}')
            else:
                print(f'error: {what}')
                errors += 1
    for key in sorted(allowed - used):
        print(f'error: --allow {key} no longer offends (or is in no --enforce folder): '
              'remove it from the list')
        errors += 1
    print(f'{errors} error(s)')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
