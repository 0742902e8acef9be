"""tests/layout/layout_check.py: what the layout checks (check_includes.py, check_sizes.py,
check_choices.py, check_op_names.py) share: their command line, the scratch tree their
self-tests plant files in, and the walk over a folder's sources.

Each check is a function violations(root) -> ["FILE:LINE: what", ...] and a self-test that
plants violations (and clean lines beside them) in a scratch tree and checks that exactly the
planted ones are reported, so a check that stopped seeing anything would fail, not pass.
"""
import contextlib
import os
import sys
import tempfile

# The checkout that holds tests/layout: what a check reads when no ROOT is given.
CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def main(violations, self_test, passed, failed):
    """The command line of a check: `CHECK.py --self-test` runs self_test(); `CHECK.py [ROOT]`
    prints violations(ROOT) one a line, then failed(count) where there are some, else the line
    `passed`. Returns the exit status: 1 where something was reported."""
    if "--self-test" in sys.argv[1:]:
        return self_test()
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = os.path.abspath(args[0]) if args else CHECKOUT
    found = violations(root)
    for v in found:
        print(v)
    print(failed(len(found)) if found else passed)
    return 1 if found else 0


@contextlib.contextmanager
def planted(files):
    """A scratch tree holding `files` ({path relative to the root: text}); yields its root."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                f.write(text)
        yield root


def self_test(violations, files, expected, reported, key=lambda v: v):
    """Plants `files`, runs violations over them and compares key(v) of what it reports with
    `expected`, in order. Prints "self-test: " + `reported` and returns 0 when they agree."""
    with planted(files) as root:
        found = [key(v) for v in violations(root)]
    if found != expected:
        print(f"self-test FAILED: expected {expected}, got {found}")
        return 1
    print("self-test: " + reported)
    return 0


def sources(root, folder, pattern):
    """The files under root/folder (or that one file) whose names match `pattern`, in a stable
    order, as full paths."""
    base = os.path.join(root, folder)
    if os.path.isfile(base):
        yield base
        return
    for path, dirs, names in os.walk(base):
        dirs.sort()
        for name in sorted(names):
            if pattern.search(name):
                yield os.path.join(path, name)
