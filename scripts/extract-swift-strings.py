#!/usr/bin/python3
"""extract-swift-strings.py OUT.pot FILE.swift...: the messages of Swift
sources, as a gettext template.

xgettext has no Swift reader. geoconsentctl marks every message as the first
argument of `tr(...)`, a string literal (a StaticString: no interpolation,
so the source text is the msgid): "..." or a multi-line \"\"\"...\"\"\" literal,
whose lines lose the indentation of its closing delimiter, as Swift does.
"""
import re
import sys

ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "0": "\0", "r": "\r"}


def unescape(body):
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            n = body[i + 1]
            if n == "u":
                end = body.index("}", i)
                out.append(chr(int(body[i + 3:end], 16)))
                i = end + 1
                continue
            if n == "(":
                raise ValueError("interpolation in a message")
            out.append(ESCAPES[n])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def messages(path):
    text = open(path, encoding="utf-8").read()
    for m in re.finditer(r'\btr\(\s*("""\n(.*?)\n([ \t]*)"""|"((?:[^"\\\n]|\\.)*)")', text, re.S):
        line = text.count("\n", 0, m.start()) + 1
        if m.group(2) is not None:
            indent = m.group(3)
            lines = [l[len(indent):] if l.startswith(indent) else l for l in m.group(2).split("\n")]
            yield line, unescape("\n".join(lines))
        else:
            yield line, unescape(m.group(4))


def po_string(s):
    esc = s.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
    parts = esc.split("\n")
    if len(parts) == 1:
        return f'"{esc}"'
    lines = [p + "\\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    return '""\n' + "\n".join(f'"{l}"' for l in lines)


def main(out, files):
    seen = {}
    for f in files:
        for line, msg in messages(f):
            seen.setdefault(msg, []).append(f"{f}:{line}")
    with open(out, "w", encoding="utf-8") as o:
        o.write('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n')
        for msg, refs in seen.items():
            o.write("#: " + " ".join(refs) + "\n")
            if "{" in msg:
                o.write("#. {name} placeholders are filled in by the program: keep them as they are\n")
            o.write(f"msgid {po_string(msg)}\nmsgstr \"\"\n\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
