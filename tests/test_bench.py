"""`python -m minimind bench`: one real benchmark at toy size through the command, so the
suite cannot rot; a benchmark that fails becomes a row of the report, not a crash."""

import json
from pathlib import Path

import pytest

from minimind.cli import main


def test_bench_runs_a_benchmark_at_tiny_size_and_writes_the_table(tmp_path, capsys):
    kept = "<!-- hub_tools: begin -->\n## Third-party tools\n\n| a | b |\n<!-- hub_tools: end -->"
    (tmp_path / "RESULTS.md").write_text(f"# old\n\n{kept}\n\n## GPU\n\nold\n")  # a section a tool wrote
    code = main(["bench", "--only", "train_throughput", "--tiny", "--threads", "1", "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr().out[-3000:]
    doc = json.loads((tmp_path / "results.json").read_text())
    record = doc["benchmarks"][0]
    assert record["name"] == "train_throughput" and record["status"] == "ok" and record["threads"] == 1
    ratios = [r for r in record["rows"] if r["model"] == "ratio ours/ref"]
    assert {r["settings"] for r in ratios} >= {"fp32", "default settings"} and all(r["tokens/s"] > 0 for r in ratios)
    assert 0 < record["summary"]["ours MFU fp32"] <= 1
    # the defaults beside our eager model, interleaved: the smoke run fails when the defaults take Muon
    # where its update costs more than the step (0.70x our eager step at toy size; 0.31x at `small`).
    # It checks the choice, not the timing: beside the other test process the toy's identical AdamW
    # paths measured anywhere from 0.73 to 1.01, so the ratio is reported (RESULTS.md), not asserted
    assert record["summary"]["default optimizer"] == "adamw"  # the toy's Muon update would cost more than a step
    assert record["summary"]["defaults / eager, ours"] > 0, record["summary"]
    report = (tmp_path / "RESULTS.md").read_text()
    assert "## train_throughput" in report and "| ratio ours/ref |" in report and "torch" in report
    assert "## GPU" in report and "Pending" in report
    assert report.count(kept) == 1 and report.index(kept) < report.index("## GPU")  # carried, before the GPU


def test_a_failing_benchmark_is_reported_not_raised(tmp_path):
    from benchmarks import _report, _suite

    record = _suite._run_one("no_such_benchmark", quick=True, tiny=False, threads=1, timeout=120)
    assert record["status"] == "failed" and "no_such_benchmark" in record["error"]
    record["description"] = "a benchmark that cannot be imported"
    doc = {"generated": "now", "command": "test", "wall_s": 1.0, "machine": {"cpu": "test"},
           "benchmarks": [record]}
    report = _report.render(doc, tmp_path)
    assert "| no_such_benchmark | failed |" in report and "ModuleNotFoundError" in report


def test_results_link_each_benchmark_to_its_dated_studies_in_the_notes():
    """RESULTS.md holds tables only; each benchmark's section links to the NOTES.md studies whose
    heading names it, by the anchor GitHub gives that heading, and the notes are not copied in."""
    from benchmarks import _report

    notes = ("# Notes\n\n## 2026-11-30 · train_throughput, step_profile: what bounds a step\ntext\n"
             "## 2026-12-01 · general: the machine\n### 2026-12-02 · dpo: not a study heading\n")
    links = _report.note_links(notes)
    assert links["train_throughput"] == [("2026-11-30: what bounds a step",
                                          "2026-11-30--train_throughput-step_profile-what-bounds-a-step")]
    assert links["step_profile"] == links["train_throughput"] and "dpo" not in links and "general" in links
    record = {"name": "step_profile", "status": "ok", "rows": [{"a": 1}], "commit": "abc1234"}
    section = _report._section(record, links)
    assert "[2026-11-30: what bounds a step](NOTES.md#2026-11-30--train_throughput-step_profile" in section
    assert "Studies:" not in _report._section({**record, "name": "dpo"}, links)
    doc = {"generated": "now", "command": "test", "wall_s": 1.0, "machine": {"cpu": "test"}, "benchmarks": [record]}
    report = _report.render(doc, Path(_report.HERE))
    assert "| step_profile | ok | abc1234 |" in report
    assert max((Path(_report.HERE) / "NOTES.md").read_text(encoding="utf-8").splitlines(), key=len) not in report


def test_a_record_is_clean_while_the_suite_rewrites_its_own_results(tmp_path):
    """The suite writes results.json and RESULTS.md after each benchmark: the next records must
    still carry the bare commit; a changed code file does mark them."""
    import subprocess

    from benchmarks import _report

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "benchmarks").mkdir()
    for name in ("results.json", "RESULTS.md", "quality.py"):
        (tmp_path / "benchmarks" / name).write_text("0\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    head = _report._git_commit(tmp_path)
    (tmp_path / "benchmarks" / "results.json").write_text("1\n")
    (tmp_path / "benchmarks" / "RESULTS.md").write_text("1\n")
    assert _report._git_commit(tmp_path) == head and "uncommitted" not in head
    (tmp_path / "benchmarks" / "quality.py").write_text("1\n")
    assert _report._git_commit(tmp_path) == head + " + uncommitted changes"


def test_only_names_known_benchmarks(capsys):
    assert main(["bench", "--only", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown benchmark(s) nope" in err and "train_throughput" in err and "quality" in err
    assert main(["bench", "--list"]) == 0
    assert "decode_throughput" in capsys.readouterr().out


def test_startup_seconds_is_the_time_before_the_first_log_beyond_its_steps():
    """A loop that logs every 10 steps at 0.2 s a step, its first 10 steps taking 45 s (a cold
    compile): 43 s of start-up; none when every step took its median time or too little is logged."""
    import pytest

    from benchmarks.quality import startup_seconds

    logs = [{"step": 10 * (i + 1), "elapsed_s": 45.0 + 2.0 * i} for i in range(20)] + [{"step": 200, "val_bpc": 6.0}]
    assert startup_seconds(logs) == pytest.approx(43.0)
    assert startup_seconds([{"step": 10 * (i + 1), "elapsed_s": 2.0 * (i + 1)} for i in range(5)]) == pytest.approx(0)
    assert startup_seconds([{"step": 10, "elapsed_s": 45.0}]) == 0.0


@pytest.fixture(scope="module")
def quality_cache(tmp_path_factory):
    """One quality-benchmark cache for the runs below: the second reuses the Shakespeare split, the
    trained tokenizer and the tokenized data, as a second run on a machine does (each leg's run folder,
    result and compile cache are made afresh either way)."""
    return tmp_path_factory.mktemp("quality")


def test_quality_side_by_side_trains_ours_and_the_reference_at_once_on_their_own_cores(quality_cache, monkeypatch):
    """The quality benchmark's side-by-side mode, for real at a 4-second budget: two child processes,
    each pinned to its own core with one thread, scored by the same evaluation; the section says
    its threads are each side's."""
    import os

    from benchmarks import quality
    from helpers import shared_corpus

    shared_corpus("shakespeare.txt")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("side by side needs 2 cores")
    monkeypatch.setenv("QUALITY_CACHE", str(quality_cache))
    monkeypatch.setattr(quality, "CACHE", quality_cache)
    result = quality.run(budget=4, corpora=("shakespeare",), overrides=["compile=off", "model.preset=pico"],
                         together=True, held_out_chars=20_000)
    ours, ref = result["rows"]
    assert ours["model"].startswith("ours") and ref["model"].startswith("reference")
    assert ours["threads"] == ref["threads"] == 1 and ours["steps"] > 0 and ref["steps"] > 0
    assert ours["held-out characters"] == ref["held-out characters"] == 20_000  # the same held-out text
    summary = result["summary"]
    assert summary["shakespeare BPC ours / reference (0.0666667 min)"] == ours["BPC"] / ref["BPC"]
    assert summary["shakespeare BPC per paragraph ours / reference (0.0666667 min)"] == (
        ours["BPC per paragraph"] / ref["BPC per paragraph"])  # the old protocol, beside running text
    last = ours["BPC, last step's weights (no average)"]  # optim.ema: the same run, scored without the average
    assert last > 0 and summary["shakespeare BPC ours, weight average / last step (0.0666667 min)"] == ours["BPC"] / last
    assert result["threads"].startswith("1 each") and "side by side" in result["threads"]
    assert (quality_cache / "compile-cache" / "shakespeare-default").is_dir()  # ours' own compile cache
    with pytest.raises(RuntimeError, match="2 cores"):  # on one core there is no side by side
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
        quality.side_by_side("shakespeare", 4, [], "x")


def test_quality_one_after_the_other_trains_ours_in_a_child_with_this_processs_threads(quality_cache, monkeypatch):
    """Without side by side, ours still trains in a child process (an empty compile cache of its
    own, as in side by side), with the threads of the process that runs the benchmark."""
    import torch

    from benchmarks import quality
    from helpers import shared_corpus

    shared_corpus("shakespeare.txt")
    monkeypatch.setenv("QUALITY_CACHE", str(quality_cache))
    monkeypatch.setattr(quality, "CACHE", quality_cache)
    threads = torch.get_num_threads()
    result = quality.run(budget=4, corpora=("shakespeare",), overrides=["compile=off", "model.preset=pico"],
                         reference=False, together=False, held_out_chars=20_000)
    (ours,) = result["rows"]
    assert ours["model"].startswith("ours") and ours["steps"] > 0 and ours["threads"] == threads
    assert ours["held-out characters"] == 20_000  # --held-out-chars reached the child
    assert ours["BPC"] == result["summary"]["shakespeare BPC ours (0.0666667 min)"]


def test_each_leg_of_ours_gets_an_empty_compile_cache(tmp_path, monkeypatch):
    from benchmarks import quality

    monkeypatch.setattr(quality, "CACHE", tmp_path)
    stale = quality.compile_cache("tang", "x") / "fxgraph"
    stale.mkdir()
    (stale / "kernel.so").write_bytes(b"compiled before")
    folder = quality.compile_cache("tang", "x")
    assert folder.is_dir() and not any(folder.iterdir())
    assert quality.compile_cache("shakespeare", "x") != folder


def test_title_use_by_chance_shuffles_titles_within_a_form():
    """The chance level of title use: each poem uses its own title and none of the others', so it
    falls from 1 to 0 once titles are shuffled among poems of one form (none keeps its own); a form
    of one poem keeps its own title; and the real held-out poems use their titles above that level
    (the figure's point)."""
    from benchmarks import grpo

    texts = ["春風吹柳", "秋月照江", "夜雨打窗", "山雪滿徑"]
    titles = [{"春"}, {"秋"}, {"夜"}, {"雪"}]
    assert grpo.title_use_by_chance(texts, titles, ["a"] * 4) == 0.0
    assert grpo.title_use_by_chance(texts, titles, ["a", "b", "c", "d"]) == 1.0
    assert grpo.title_use_by_chance(texts, [{"江"}] * 4, ["a"] * 4) == 0.25
    real = grpo.real_poems(limit=300)
    assert 0.1 < real[grpo.CHANCE] < real["uses a title character"] - 0.2


def test_grpo_compares_saved_models_with_the_same_code_and_trains_nothing(monkeypatch):
    """`python -m benchmarks.grpo --compare-models BEFORE,AFTER[,AFTER...]` (a recipe's GRPO stage, or
    runs from one start, measured after the fact): the same model each time gives the same figures,
    seeded answers included, beside real poems."""
    from benchmarks import grpo

    def no_training(*args, **kwargs):
        raise AssertionError("compare trains nothing")

    monkeypatch.setattr(grpo, "train_grpo", no_training)
    shipped, afters = str(grpo.START), ["after GRPO, 1", "after GRPO, 2"]
    result = grpo.run(tiny=True, compare_models=", ".join([shipped] * 3))
    summary, rows = result["summary"], result["rows"]
    assert [r["model"].split(" (")[0] for r in rows] == ["before GRPO", "real regulated poems", *afters]
    assert rows[2]["form + rhyme share"] == rows[-1]["form + rhyme share"]
    assert summary["poem BPC after / before"] == 1.0 and summary["held-out prompts"] == 12
    for figure in ("requested form share", "form + rhyme share", *grpo.VARIETY):
        assert summary[f"{figure} before"] == summary[f"{figure} after"], figure
    assert 0 < summary["real regulated poems that rhyme (same rule)"] < 1
