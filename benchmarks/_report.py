"""RESULTS.md from the suite's records: the machine, a summary table, a section per
benchmark (its table and summary, or why it failed) with links to the studies of it in
NOTES.md, and the GPU section (or a note that it is pending). The analysis stays in
NOTES.md, a dated log, so the tables are not buried under it and it is written once."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from importlib import metadata
from pathlib import Path

from benchmarks._harness import ROOT, fmt, table

PACKAGES = ["torch", "transformers", "tokenizers", "datasets", "peft", "bitsandbytes", "torchao",
            "llama_cpp_python", "numpy"]
HERE = Path(__file__).resolve().parent


def machine(threads: int, load_before, load_after) -> dict:
    import torch

    from benchmarks._harness import machine as basic
    from minimind.hardware import cpu_flags

    info = basic()
    present = cpu_flags()
    flags = ", ".join(f for f in ("avx512_bf16", "amx_bf16", "avx512_vnni") if f in present)
    if present and not flags:  # which of the three kinds of machine here: neither bf16 kind says so
        flags = "no bf16 instructions" + ("; avx2" if "avx2" in present else "")
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {
        "cpu": f"{info['cpu']} ({os.cpu_count()} cores{'; ' + flags if flags else ''})",
        "memory GiB": round(_mem_total_kb() / 2**20, 1),
        "GPU": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "PyTorch threads": threads or torch.get_num_threads(),
        "OS": platform.platform(), "python": platform.python_version(), **versions,
        "git": _git_commit(),
        "load average (1 min) before / after": f"{load_before[0]:.2f} / {load_after[0]:.2f}",
    }


def _mem_total_kb() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


# what the suite itself writes while it runs: a change there says nothing about the code measured
SUITE_OUTPUTS = ("benchmarks/results.json", "benchmarks/RESULTS.md", "benchmarks/gpu")


def _git_commit(root: Path = ROOT) -> str:
    """HEAD, with "+ uncommitted changes" when a tracked file other than the suite's own
    outputs differs from it (the suite rewrites those after each benchmark)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                *(f":(exclude){path}" for path in SUITE_OUTPUTS)],
                               cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        return head + (" + uncommitted changes" if dirty else "") if head else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _headline(record: dict) -> str:
    if record["status"] != "ok":
        return f"**{record['status']}**: {record.get('error', '')}"[:300]
    summary = record.get("summary", {})
    keys = [k for k in record.get("headline") or list(summary)[:3] if k in summary]
    return "; ".join(f"{k}: {fmt(summary[k])}" for k in keys)


def _section(record: dict, notes: dict[str, list[tuple[str, str]]] | None = None) -> str:
    size = "tiny" if record.get("tiny") else "quick" if record.get("quick") else "full"
    lines = [f"## {record['name']}", "", f"{record.get('description', '')}. Measured {record.get('measured')} "
             f"({size} settings, commit {record.get('commit', 'not recorded')}, PyTorch threads: "
             f"{record.get('threads', '?')}, {record.get('wall_s', 0):.0f} s).", ""]
    studies = (notes or {}).get(record["name"], [])
    if studies:
        lines += ["Studies: " + "; ".join(f"[{title}](NOTES.md#{slug})" for title, slug in studies) + ".", ""]
    if record["status"] != "ok":
        lines += [f"**{record['status']}**: {record.get('error', '')}", "", "```",
                  (record.get("traceback") or record.get("output_tail") or "").strip(), "```"]
        return "\n".join(lines)
    lines += [table(record["rows"]), ""]
    summary = record.get("summary") or {}
    if summary:
        lines += [table([{"summary": k, "value": v} for k, v in summary.items()])]
    return "\n".join(lines)


STUDY = re.compile(r"^## (\d{4}-\d{2}-\d{2}) · ([^:]+): (.+)$")


def note_links(text: str) -> dict[str, list[tuple[str, str]]]:
    """Benchmark name -> (heading, GitHub anchor) of each NOTES.md study headed
    `## YYYY-MM-DD · name[, name]: title`."""
    links: dict[str, list[tuple[str, str]]] = {}
    for line in text.splitlines():
        match = STUDY.match(line.strip())
        if not match:
            continue
        heading = line.strip()[3:]
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        for name in match.group(2).split(","):
            links.setdefault(name.strip(), []).append((f"{match.group(1)}: {match.group(3)}", slug))
    return links


def _gpu_section(out_dir: Path) -> str:
    results = out_dir / "gpu" / "results.json"
    if not results.is_file():
        return ("## GPU\n\nPending: no GPU was available when this table was written. "
                "`bash benchmarks/gpu_suite.sh` records the same suite on a CUDA machine (bf16, fused AdamW, "
                "flash SDPA, QLoRA with bitsandbytes 4-bit kernels) into `benchmarks/gpu/`, and the next "
                "`python -m minimind bench` run includes it here.")
    doc = json.loads(results.read_text(encoding="utf-8"))
    parts = [f"## GPU: {doc['machine'].get('GPU')}", "",
             f"Written by `{doc.get('command')}` on {doc.get('generated')}.", ""]
    for record in doc["benchmarks"]:
        parts += [_section(record).replace("\n## ", "\n### ", 1).replace("## ", "### ", 1), ""]
    return "\n".join(parts)


# A section a benchmark writes into RESULTS.md itself, between its markers (hub_tools)
MARKED_SECTION = re.compile(r"<!-- (\w+): begin -->.*?<!-- \1: end -->", re.S)


def put_section(doc: str, text: str, name: str) -> str:
    """`doc` (a RESULTS.md) with the marked section `text` of benchmark `name`: in place of its
    previous one, else before the GPU section, else at the end."""
    begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
    if begin in doc and end in doc:
        head, rest = doc.split(begin, 1)
        return head + text + rest.split(end, 1)[1]
    if "\n## GPU" in doc:
        head, tail = doc.split("\n## GPU", 1)
        return head.rstrip("\n") + "\n\n" + text + "\n\n## GPU" + tail
    return doc.rstrip("\n") + "\n\n" + text + "\n"


def carry_sections(previous: str, rendered: str) -> str:
    """`rendered` (the suite's new RESULTS.md) with the marked sections the previous one held: a
    benchmark that writes its own section (hub_tools) keeps it through a suite run."""
    for match in MARKED_SECTION.finditer(previous):
        rendered = put_section(rendered, match.group(0), match.group(1))
    return rendered


def render(doc: dict, out_dir: Path) -> str:
    minutes, seconds = divmod(int(doc["wall_s"]), 60)
    notes_file = HERE / "NOTES.md"
    notes = note_links(notes_file.read_text(encoding="utf-8")) if notes_file.is_file() else {}
    parts = [
        "# Benchmark results", "",
        (f"Written by `{doc['command']}` on {doc['generated']}; this run took {minutes} min {seconds} s. "
         "Each benchmark runs our code and its reference in the same process, alternating them after a "
         "warm-up, and reports medians: read the ratios; absolute figures move with the machine's load. "
         "What the figures mean, and the studies behind them, are in [NOTES.md](NOTES.md), a dated log."), "",
        "## Machine", "", table([{"": k, " ": v} for k, v in doc["machine"].items()]), "",
        "## Summary", "",
        table([{"benchmark": r["name"], "status": r["status"], "commit": r.get("commit", "not recorded"),
                "measured": r.get("measured", ""), "seconds": r.get("wall_s", 0.0), "headline": _headline(r)}
               for r in doc["benchmarks"]]), "",
    ]
    parts += [_section(r, notes) + "\n" for r in doc["benchmarks"]]
    if out_dir.resolve() != (HERE / "gpu").resolve():
        parts += [_gpu_section(out_dir), ""]
    return "\n".join(parts)
