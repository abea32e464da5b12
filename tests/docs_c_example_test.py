#!/usr/bin/env python3
"""The C examples of docs/plugins.md compile as written (issue 40 item 6): every ```c block that
fills an ssmp_plugin table is compiled as C99 with -Wall -Wextra -Werror -pedantic against
plugin/ssmcheck_plugin.h, each function it names (my_create, ...) declared with the type of the
member it fills, so a member renamed or retyped in the header, or an example that goes back to
positional initialisers, fails here. Self-check first: the same table with its designators removed
(a positional initialiser, which shifts every member after one left out) must not compile.

usage: docs_c_example_test.py DOCS/plugins.md PLUGIN_INCLUDE_DIR CC
Writes only into a private temporary directory, removed at exit."""
import os
import re
import subprocess
import sys
import tempfile

FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-c"]


def c_blocks(md):
    """(line number, text) of every ```c block of `md`."""
    out, lines, i = [], md.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() == "```c":
            start, body = i + 1, []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            out.append((start + 1, "\n".join(body) + "\n"))
        i += 1
    return out


def translation_unit(block, body=None):
    """The block as a file that compiles alone: the header, a declaration of each function the table
    names with its member's type (the header's function pointer types), and a table the block
    refers to but elides (`= { /* ... */ .capabilities = &caps }` needs none). `body`: the text to
    compile in place of the block, with the block's declarations."""
    names = re.findall(r"\.(\w+)\s*=\s*(my_\w+)", block)
    decls = "".join(f"extern __typeof__(*((ssmp_plugin*)0)->{member}) {fn};\n" for member, fn in names)
    # a block without the entry point still has to leave its table used
    tail = "" if "ssmcheck_plugin(void)" in block else \
        "SSMP_EXPORT const ssmp_plugin* ssmcheck_plugin(void) { return &table; }\n"
    body = block if body is None else body
    return '#include "ssmcheck_plugin.h"\n' + decls + body.replace('#include "ssmcheck_plugin.h"\n', "") + tail


def compile_unit(cc, include, text, tmp):
    path = os.path.join(tmp, "example.c")
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([cc, *FLAGS, "-I", include, path, "-o", os.path.join(tmp, "example.o")],
                       capture_output=True, text=True)
    return r.returncode, r.stderr


def main():
    docs, include, cc = sys.argv[1:4]
    with open(docs) as f:
        blocks = [(n, b) for n, b in c_blocks(f.read()) if "ssmp_plugin table" in b]
    if not blocks:
        print(f"{docs}: no ```c block fills an ssmp_plugin table")
        return 1
    failed = 0
    with tempfile.TemporaryDirectory(prefix="ssmcheck-docs-c-") as tmp:
        # self-check: the first table, positional, does not compile (members out of order or left out)
        n0, b0 = blocks[0]
        positional = re.sub(r"\.\w+\s*=\s*", "", b0)
        rc, err = compile_unit(cc, include, translation_unit(b0, positional), tmp)
        if rc == 0:
            print(f"self-check: {docs}:{n0}'s table without its designators compiled: the test cannot tell "
                  "a positional initialiser")
            return 1
        print(f"self-check: {docs}:{n0} made positional is refused ({err.strip().splitlines()[0]})")
        for n, b in blocks:
            rc, err = compile_unit(cc, include, translation_unit(b), tmp)
            if rc != 0:
                print(f"{docs}:{n}: the C example does not compile with {' '.join(FLAGS)}:\n{err}")
                failed += 1
            else:
                members = len(re.findall(r"[.]\w+ *=", b))
                print(f"{docs}:{n}: compiles ({members} designated members)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
