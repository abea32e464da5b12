#!/usr/bin/env python3
"""The layering (README.md, "Layout"): every `#include "FOLDER/..."` arrow of every C, C++ and CUDA
source points along the table's "links" column, taken transitively (a folder may include the
folders it links and what they link); "everything" allows every folder. The table is the one place
the layering is written; cmake/layering.cmake makes the build refuse the same arrows.

    layering_test.py ROOT     checks ROOT's sources, after a self-check on a synthetic tree that
                              must find its one upward arrow
    layering_test.py --build CXX INCLUDE_DIR...
                              the build's side: a compare/ source including "reference/..." does
                              not compile with compare's include path, and one including what
                              compare links does
"""
import os
import re
import subprocess
import sys
import tempfile

SOURCE = re.compile(r"\.(c|cc|cpp|h|hpp|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
SKIP_DIRS = {"build", ".git", "peers", "__pycache__", "node_modules"}


def layout_links(readme_text):
    """{folder: set of folders it links} from README.md's Layout table."""
    m = re.search(r"^## Layout\n(.*?)(?=^## )", readme_text, re.M | re.S)
    if not m:
        raise SystemExit("README.md has no '## Layout' section")
    rows = [l for l in m.group(1).splitlines() if l.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    if "links" not in header:
        raise SystemExit("README.md's Layout table has no 'links' column: %s" % header)
    col = header.index("links")
    table = {}
    for row in rows[2:]:  # after the header and the |---| line
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        folder = re.fullmatch(r"`([a-z_]+)/`", cells[0])
        if folder:
            table[folder.group(1)] = cells[col] if col < len(cells) else ""
    links = {}
    for folder, text in table.items():
        words = set(re.findall(r"[a-z][a-z0-9_]*", text))  # lower case: "CUDA runtime" is not cuda/
        links[folder] = set(table) if "everything" in words else words & set(table)
    return links


def allowed(links):
    """{folder: folders its sources may include}: itself and the closure of its links."""
    out = {}
    for folder in links:
        seen, todo = {folder}, [folder]
        while todo:
            for nxt in links[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        out[folder] = seen
    return out


def arrows(root, folders):
    """(file, line, included folder, include text) for every include naming a table folder."""
    found = []
    for folder in sorted(folders):
        for d, dirs, files in os.walk(os.path.join(root, folder)):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("build"))
            for f in sorted(files):
                if not SOURCE.search(f):
                    continue
                path = os.path.join(d, f)
                text = open(path, encoding="utf-8", errors="replace").read()
                for m in INCLUDE.finditer(text):
                    inc = m.group(1)
                    head = inc.split("/")[0]
                    if "/" not in inc or head not in folders or os.path.exists(os.path.join(d, inc)):
                        continue  # the folder's own relative includes, system-style and generated headers
                    line = text.count("\n", 0, m.start()) + 1
                    found.append((os.path.relpath(path, root), line, head, inc))
    return found


def violations(root, readme_text):
    links = allowed(layout_links(readme_text))
    found = arrows(root, set(links))
    bad = [(f, line, inc) for f, line, head, inc in found if head not in links[f.split(os.sep)[0]]]
    return links, found, bad


def self_check(readme_text):
    """A synthetic tree under the real table: one upward arrow (compare -> reference), one arrow
    allowed only through the closure (fuzz -> core, via reference), a same-folder relative include."""
    with tempfile.TemporaryDirectory() as root:
        files = {
            "compare/upward.cpp": '#include "compare/compare.h"\n#include "reference/reference_backend.h"\n',
            "compare/compare.h": "#pragma once\n",
            "fuzz/down.cpp": '#include "core/op.h"\n#include "fuzz/detail/x.h"\n',
            "fuzz/fuzz/detail/x.h": "",
            "core/op.h": "#pragma once\n",
        }
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
            with open(os.path.join(root, name), "w") as f:
                f.write(text)
        links, found, bad = violations(root, readme_text)
        expect = [(os.path.join("compare", "upward.cpp"), 2, "reference/reference_backend.h")]
        if bad != expect:
            raise SystemExit("self-check FAILED: expected %s, found %s" % (expect, bad))
        if "reference" in links["compare"] or "core" not in links["fuzz"]:
            raise SystemExit("self-check FAILED: the table reads compare -> %s, fuzz -> %s" %
                             (sorted(links["compare"]), sorted(links["fuzz"])))
        print("ok   self-check: the upward arrow %s:%d -> %s is found, %d arrows in all" %
              (expect[0][0], expect[0][1], expect[0][2], len(found)))


def build_check(cxx, include_dirs):
    flags = [cxx, "-std=c++17", "-fsyntax-only", "-x", "c++"] + ["-I" + d for d in include_dirs if d]
    with tempfile.TemporaryDirectory() as tmp:
        def compile(name, text):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(text)
            return subprocess.run(flags + [path], capture_output=True, text=True)
        down = compile("compare_down.cpp", '#include "compare/compare.h"\n#include "core/op.h"\n')
        if down.returncode != 0:
            raise SystemExit("FAILED: compare's own and core's headers do not compile with compare's include "
                             "path:\n" + down.stderr[-3000:])
        up = compile("compare_up.cpp", '#include "compare/compare.h"\n#include "reference/reference_backend.h"\n')
        if up.returncode == 0 or "reference/reference_backend.h" not in up.stderr:
            raise SystemExit("FAILED: an upward include (compare -> reference) compiled, or failed for "
                             "another reason (exit %d):\n%s" % (up.returncode, up.stderr[-3000:]))
        print("ok   compare's include path compiles compare/ and core/ headers and refuses reference/: " +
              up.stderr.strip().splitlines()[0])


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--build":
        return build_check(sys.argv[2], sys.argv[3:])
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    readme_text = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    self_check(readme_text)
    links, found, bad = violations(root, readme_text)
    if len(links) < 10 or len(found) < 100:  # nothing read proves nothing
        raise SystemExit("read only %d folders and %d arrows: is %s the repository?" % (len(links), len(found), root))
    for f, line, inc in bad:
        top = f.split(os.sep)[0]
        print('%s:%d: #include "%s": %s/ may include only %s (README.md, Layout, "links")' %
              (f, line, inc, top, ", ".join(sorted(links[top]))))
    if bad:
        raise SystemExit("FAILED: %d include arrows against the layering" % len(bad))
    print("ok   %d include arrows of %d folders follow README.md's Layout table" % (len(found), len(links)))


if __name__ == "__main__":
    main()
