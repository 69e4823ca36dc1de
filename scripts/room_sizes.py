#!/usr/bin/env python3
"""Lists the rooms that outgrew the house rules: Rust files over 700
non-test lines, functions over 150 lines, and nesting deeper than 5
blocks inside a function. Reads rustfmt-formatted source (4-space
indents); a file's test module (`#[cfg(test)] mod ...`) does not count.

    scripts/room_sizes.py [--max-file 700] [--max-fn 150] [--max-depth 5] [PATH...]

Exits 1 when anything is over, so it can gate a change."""
import argparse, os, re, subprocess, sys

FN = re.compile(r'^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"[^"]*"\s+)?fn\s+(\w+)')

def non_test_lines(lines):
    for i, l in enumerate(lines):
        if l.strip() == '#[cfg(test)]' and i + 1 < len(lines) and re.match(r'\s*(pub\s+)?mod\s+\w+', lines[i + 1]):
            return lines[:i]
    return lines

def functions(lines):
    out = []
    for i, l in enumerate(lines):
        m = FN.match(l)
        if not m or l.rstrip().endswith(';'):
            continue
        indent = m.group(1)
        end = None
        for j in range(i, len(lines)):
            if lines[j].startswith(indent + '}') and len(lines[j].rstrip()) == len(indent) + 1:
                end = j
                break
            if j > i and lines[j].rstrip().endswith(';') and lines[j].startswith(indent) and not lines[j].startswith(indent + ' ') and '{' not in ''.join(lines[i:j]):
                break
        if end is None:
            continue
        body = lines[i:end + 1]
        base = len(indent) // 4
        depth = max((len(b) - len(b.lstrip(' '))) // 4 - base for b in body if b.strip()) if body else 0
        out.append((m.group(8), i + 1, end - i + 1, depth))
    return out

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--max-file', type=int, default=700)
    ap.add_argument('--max-fn', type=int, default=150)
    ap.add_argument('--max-depth', type=int, default=5)
    ap.add_argument('paths', nargs='*')
    a = ap.parse_args()
    files = a.paths or [p for p in subprocess.run(['git', 'ls-files', '*.rs'], capture_output=True, text=True).stdout.split()]
    over = 0
    for p in sorted(files):
        # A module file that is itself a test module (`#[cfg(test)] mod
        # tests;` in its parent) is test code too.
        if ('/tests/' in p or p.startswith(('tests/', 'fuzz/', 'integration-tests/'))
                or '/benches/' in p or p.endswith('/tests.rs')):
            continue
        lines = open(p, encoding='utf-8').read().split('\n')
        body = non_test_lines(lines)
        if len(body) > a.max_file:
            print(f'{p}: {len(body)} non-test lines')
            over += 1
        for name, line, n, depth in functions(body):
            if n > a.max_fn:
                print(f'{p}:{line}: fn {name}: {n} lines')
                over += 1
            if depth > a.max_depth + 1:
                print(f'{p}:{line}: fn {name}: nesting depth {depth - 1}')
                over += 1
    print(f'{over} over the limits')
    return 1 if over else 0

if __name__ == '__main__':
    sys.exit(main())
