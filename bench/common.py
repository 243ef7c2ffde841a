"""Helpers shared by the benchmarks in bench/: the machine description, timing statistics,
tables, dd and the page cache, and profiling.

Every benchmark prints the machine it ran on (the lines docs/benchmarks.md asks for) and its
results as Markdown tables, so a run's output can be pasted into the docs as it is.
"""

from __future__ import annotations

import cProfile
import datetime as _dt
import io
import json
import os
import platform
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

MiB = 1 << 20
GiB = 1 << 30

# statfs f_type values of the filesystems we are likely to meet (linux/magic.h).
_FS_MAGIC = {
    0xEF53: "ext2/ext3/ext4",
    0x58465342: "xfs",
    0x9123683E: "btrfs",
    0x01021994: "tmpfs",
    0x794C7630: "overlayfs",
    0x2FC12FC1: "zfs",
    0x6969: "nfs",
    0x65735546: "fuse",
}


@dataclass(frozen=True, slots=True)
class MachineInfo:
    """What a benchmark result depends on, recorded beside it."""

    date_utc: str
    nproc: int
    cpu_model: str
    ram_gib: float
    kernel: str
    python: str
    data_dir: str
    filesystem: str  # type, device and mount point of the data dir

    def lines(self) -> list[str]:
        return [
            f"- date (UTC): {self.date_utc}",
            f"- nproc: {self.nproc}; CPU: {self.cpu_model}; RAM: {self.ram_gib:.1f} GiB",
            f"- kernel: {self.kernel}; Python: {self.python}",
            f"- data dir: {self.data_dir} on {self.filesystem}",
        ]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def filesystem_of(path: str | os.PathLike) -> str:
    """'<type> (<device> mounted on <mount point>)' for the filesystem holding `path`."""
    fs_type = "unknown"
    try:
        out = subprocess.run(["stat", "-f", "-c", "%t", str(path)], capture_output=True, text=True,
                             check=True).stdout.strip()
        magic = int(out, 16)
        fs_type = _FS_MAGIC.get(magic, f"statfs type 0x{magic:x}")
    except (OSError, ValueError, subprocess.CalledProcessError):
        pass
    device = mount = "?"
    try:
        out = subprocess.run(["df", "-P", "-T", str(path)], capture_output=True, text=True,
                             check=True).stdout.splitlines()
        fields = out[-1].split()
        device, mount = fields[0], fields[-1]
        fs_type = fields[1] if fs_type.startswith(("unknown", "ext2")) else fs_type
    except (OSError, IndexError, subprocess.CalledProcessError):
        pass
    return f"{fs_type} ({device} mounted on {mount})"


def is_tmpfs(path: str | os.PathLike) -> bool:
    return filesystem_of(path).startswith("tmpfs")


def machine_info(data_dir: str | os.PathLike) -> MachineInfo:
    return MachineInfo(
        date_utc=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        nproc=os.cpu_count() or 0,
        cpu_model=_cpu_model(),
        ram_gib=_ram_bytes() / GiB,
        kernel=platform.release(),
        python=f"{platform.python_implementation()} {platform.python_version()}",
        data_dir=str(data_dir),
        filesystem=filesystem_of(data_dir),
    )


# --- statistics -------------------------------------------------------------------------------

def percentile(sorted_values: Sequence[float], p: float) -> float:
    """The p-th percentile (0-100) of already sorted values, nearest rank."""
    if not sorted_values:
        raise ValueError("no values")
    k = max(0, min(len(sorted_values) - 1, round(p / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


# --- output -----------------------------------------------------------------------------------

def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table; numbers are right-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    numeric = [all(_looks_numeric(r[i]) for r in cells) and bool(cells) for i in range(len(headers))]

    def fmt(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if num else c.ljust(w)
                                 for c, w, num in zip(row, widths, numeric)) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if num else ("-" * (w + 2))
                         for w, num in zip(widths, numeric)) + "|"
    return "\n".join([fmt(headers), sep, *(fmt(r) for r in cells)])


def _looks_numeric(s: str) -> bool:
    return bool(re.fullmatch(r"[-+]?[\d.,]+\s*(%|x|×|µs|ms|s|MB/s|GB/s|s/GB)?", s.strip()))


def write_json(path: str | os.PathLike, machine: MachineInfo, results: dict) -> None:
    Path(path).write_text(json.dumps({"machine": asdict(machine), "results": results}, indent=2) + "\n")


def say(*args: object) -> None:
    """Progress lines go to stderr so stdout stays the report."""
    print(*args, file=sys.stderr, flush=True)


# --- the machine's own limits -----------------------------------------------------------------

_DD_SECONDS = re.compile(r"copied, ([\d.]+) s")


def dd_write(path: str | os.PathLike, *, block_size: str, count: int) -> float:
    """Run `dd if=/dev/zero of=path bs=block_size count=count` (buffered: no conv=fsync) and
    return the seconds dd reports for the copy."""
    result = subprocess.run(["dd", "if=/dev/zero", f"of={path}", f"bs={block_size}", f"count={count}"],
                            capture_output=True, text=True, check=True, env={**os.environ, "LC_ALL": "C"})
    match = _DD_SECONDS.search(result.stderr)
    if not match:
        raise RuntimeError(f"cannot parse dd output: {result.stderr!r}")
    return float(match.group(1))


def dd_read(path: str | os.PathLike, *, block_size: str = "1M") -> float:
    """`dd if=path of=/dev/null bs=block_size`; the seconds dd reports."""
    result = subprocess.run(["dd", f"if={path}", "of=/dev/null", f"bs={block_size}"],
                            capture_output=True, text=True, check=True, env={**os.environ, "LC_ALL": "C"})
    match = _DD_SECONDS.search(result.stderr)
    if not match:
        raise RuntimeError(f"cannot parse dd output: {result.stderr!r}")
    return float(match.group(1))


def drop_caches() -> str | None:
    """`sync; echo 3 > /proc/sys/vm/drop_caches`. Returns None on success, else why it failed."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        return f"cannot drop the page cache: {e}"
    return None


def cached_fraction(path: str | os.PathLike) -> float | None:
    """The fraction of `path` resident in the page cache, from util-linux `fincore`; None when
    fincore is missing or fails."""
    try:
        out = subprocess.run(["fincore", "-b", "-n", "-o", "RES,SIZE", str(path)], capture_output=True,
                             text=True, check=True).stdout.split()
        resident, size = int(out[0]), int(out[1])
        return resident / size if size else None
    except (OSError, ValueError, IndexError, subprocess.CalledProcessError):
        return None


def prefault(root: Path, nbytes: int) -> None:
    """Write and delete `nbytes` with dd (untimed) right before a timed write.

    On this VM (Firecracker, virtio-balloon free page reporting) memory freed for ~2 s goes back
    to the host, and the next write into the page cache faults it in again at ~0.5 GB/s instead
    of ~5 GB/s. A broker writing steadily reuses page-cache pages and never pays that, so each
    timed write (dd's and the log's alike) starts right after this one has made the guest's free
    pages resident again.
    """
    path = root / "prefault.out"
    dd_write(path, block_size="1M", count=max(1, nbytes // MiB))
    path.unlink()


def remove_written(path: Path) -> None:
    """Remove a case's data, sync and rest a second, so that the next case's writes go into the
    memory it freed, where a prefault would not last (a latency window of several seconds; a run
    after GBs of kept logs): a broker whose retention deletes old segments writes there too. The
    sync takes the removal's journal work and discards out of the next case."""
    shutil.rmtree(path, ignore_errors=True)
    os.sync()
    time.sleep(1.0)


# --- profiling --------------------------------------------------------------------------------

def per_call_us(fn, items) -> float:
    """Mean µs of fn(item) over items."""
    start = time.perf_counter()
    for item in items:
        fn(item)
    return (time.perf_counter() - start) / len(items) * 1e6


def profile_call(fn, top: int = 14) -> str:
    """Run fn under cProfile; the top functions by own time, as text."""
    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    total = next((line.strip() for line in lines if "function calls" in line), "")
    return "\n".join([total, *(line.rstrip() for line in lines[start:] if line.strip())])
