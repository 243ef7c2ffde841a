"""A copy of a logbroker source tree with some modules compiled to C extensions beside their .py
files, for `--src` of the other benchmarks (the compiled-hot-path experiment,
docs/benchmarks.md "Request cost").

The copy imports the extension wherever one was built (Python's import system prefers an
extension module to a .py of the same name in the same directory) and the .py everywhere else;
the tree it was made from is not touched. Two compilers:

- `cython` (pure Python mode): the .py files compiled as they are, classes stay ordinary Python
  classes; `annotation_typing=False`, so annotations add no runtime type checks.
- `mypyc`: needs the modules mypy-clean. The handful of edits that made them so (type-only
  ignores for the mmap field and the dynamically made error classes, two unions spelled out, a
  `continue` inside try/finally that mypyc does not implement) are `compiled_tree_mypyc.patch`,
  applied to the copy only. `Log` (storage/log.py) is not in the set: its LogFlush and
  LogRetention mixins would have to become mypyc traits.

Needs gcc, the Python headers, and Cython==3.3.1 or mypy==2.4.1 in the running interpreter.

    .venv/bin/python bench/compiled_tree.py DEST --tool cython|mypyc [--src src] [--opt-level 3]
        [MODULE.py ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PATCH = HERE / "compiled_tree_mypyc.patch"

# What the in-situ breakdown puts on a paced Produce's way (docs/benchmarks.md, "Request
# cost"): framing, header and Produce decode, the response encoder, the records header,
# the log append chain below Log, the replication layer, the dispatcher and the connection.
CYTHON_MODULES = [
    "logbroker/protocol/framing.py", "logbroker/protocol/headers.py", "logbroker/protocol/codec.py",
    "logbroker/protocol/wire.py", "logbroker/protocol/requests/produce.py",
    "logbroker/protocol/responses/produce.py", "logbroker/protocol/responses/common.py",
    "logbroker/records/batch.py", "logbroker/records/varint.py",
    "logbroker/storage/log.py", "logbroker/storage/local_log.py", "logbroker/storage/log_segment.py",
    "logbroker/storage/log_segments.py", "logbroker/storage/file_records.py",
    "logbroker/storage/offset_index.py", "logbroker/storage/time_index.py",
    "logbroker/storage/abstract_index.py", "logbroker/storage/producer_state.py",
    "logbroker/storage/producer_state_entry.py", "logbroker/storage/log_validator.py",
    "logbroker/storage/writeback.py", "logbroker/storage/log_flush.py",
    "logbroker/replication/partition.py", "logbroker/replication/replica_manager.py",
    "logbroker/replication/purgatory.py", "logbroker/server/dispatch.py",
    "logbroker/server/network.py", "logbroker/server/apis/produce.py",
]
# mypyc: the protocol leaves and the append chain below Log, compiled as one group (one shared
# library, so calls between them are direct C calls and their classes native).
MYPYC_MODULES = [
    "logbroker/protocol/framing.py", "logbroker/protocol/headers.py", "logbroker/protocol/wire.py",
    "logbroker/protocol/requests/produce.py", "logbroker/protocol/responses/produce.py",
    "logbroker/protocol/responses/common.py", "logbroker/records/batch.py",
    "logbroker/storage/local_log.py", "logbroker/storage/log_segment.py",
    "logbroker/storage/log_segments.py", "logbroker/storage/file_records.py",
    "logbroker/storage/offset_index.py", "logbroker/storage/time_index.py",
    "logbroker/storage/abstract_index.py", "logbroker/storage/producer_state.py",
    "logbroker/storage/producer_state_entry.py", "logbroker/storage/log_validator.py",
]


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dest", type=Path, help="directory to create; the tree is DEST/src")
    parser.add_argument("--tool", choices=("cython", "mypyc"), required=True)
    parser.add_argument("--src", type=Path, default=HERE.parent / "src", help="the tree to copy")
    parser.add_argument("--opt-level", default="3", help="gcc -O level (mypyc: MYPYC_OPT_LEVEL)")
    parser.add_argument("modules", nargs="*", help="paths relative to src (default: the tool's set)")
    args = parser.parse_args(argv)

    tree = args.dest / "src"
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(args.src, tree, ignore=shutil.ignore_patterns("__pycache__", "*.so", "build"))
    env = dict(os.environ)
    if args.tool == "cython":
        modules = args.modules or CYTHON_MODULES
        env["CFLAGS"] = f"-O{args.opt_level}"
        command = [_bin("cythonize"), "-i", "-3", "-j", "2", "-X", "annotation_typing=False", *modules]
    else:
        modules = args.modules or MYPYC_MODULES
        subprocess.run(["patch", "-s", "-p1", "-d", str(tree), "-i", str(PATCH)], check=True)
        env["MYPYC_OPT_LEVEL"] = args.opt_level
        command = [_bin("mypyc"), "--follow-imports=silent", "--ignore-missing-imports", *modules]
    subprocess.run(command, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(tree / "build", ignore_errors=True)
    for generated in tree.rglob("*.c"):
        generated.unlink()
    built = sorted(tree.rglob("*.so"))
    text = subprocess.run(["size", "-t", *map(str, built)], capture_output=True, text=True, check=True)
    print(f"{len(built)} extension modules in {tree}; machine code (text) "
          f"{int(text.stdout.splitlines()[-1].split()[0]) / 1e6:.2f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
