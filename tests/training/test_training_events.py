"""A run's events: the trainer writes the terminal's words into train.log and keeps the event
beside them (events.jsonl, status.json's error_event), so the page can word it its own way
without reading those words; a run from before events reads as it did."""

import json
import os
import signal

from training_helpers import make_config, write_text_corpus

from minimind.training import RunDir, train
from minimind.training.events import RunEvent


def test_each_event_has_the_terminals_words_and_survives_storage():
    stopped, ended, kept = RunEvent("stopped", step=4), RunEvent("ended"), RunEvent("ended", checkpoint="step-8")
    assert stopped.cli_text() == "stopped at step 4 (checkpoint saved); resume with --resume"
    assert ended.cli_text() == "the training process ended unexpectedly (see train.log)"
    assert kept.cli_text() == ("the training process ended unexpectedly (see train.log); its last checkpoint "
                               "(step-8) is kept and it can be resumed")
    for event in (stopped, ended, kept):
        assert RunEvent.from_dict(json.loads(json.dumps(event.to_dict()))) == event
    assert ended.to_dict() == {"kind": "ended"}  # fields it does not have are left out
    for stored in ({"kind": "exploded"}, {"kind": "stopped", "colour": "red"}, ["stopped"], None):
        assert RunEvent.from_dict(stored) is None  # unknown to this reader: it shows the text instead


def test_a_logged_event_is_found_by_its_line_whatever_the_lines_before_it_hold(tmp_path):
    run = RunDir(tmp_path / "run").create()
    run.log("床前明月光 — tokenizer: 1.09 chars/token")  # multi-byte text: offsets count bytes
    run.log_event(RunEvent("stopped", step=3))
    run.log("stopped at step 3 (checkpoint saved); resume with --resume")  # the same words, but plain text
    run.log_event(RunEvent("ended", checkpoint="step-3"))
    with run.events_file.open("a", encoding="utf-8") as fh:
        fh.write('{"at": 0, "kind": "stopp')  # a line cut by a kill
    lines = run.log_lines(10)
    assert [event for _, event in lines] == [None, RunEvent("stopped", step=3), None,
                                             RunEvent("ended", checkpoint="step-3")]
    written = run.log_file.read_text(encoding="utf-8").splitlines()
    assert [text for text, _ in lines] == written  # train.log holds the terminal's words, as before events
    assert written[1][20:] == "stopped at step 3 (checkpoint saved); resume with --resume"
    assert run.log_lines(1) == lines[-1:] and run.log_lines(0) == []


def test_an_event_whose_line_was_rewritten_is_not_lent_to_another_line(tmp_path):
    run = RunDir(tmp_path / "run").create()
    run.log("first line")
    run.log_event(RunEvent("stopped", step=3))
    lines = run.log_file.read_text(encoding="utf-8").splitlines()
    run.log_file.write_text(lines[0] + "\n" + lines[1][:20] + "eval step 3: loss 2.5\n", encoding="utf-8")
    assert [event for _, event in run.log_lines()] == [None, None]


def test_a_run_from_before_events_has_plain_lines(tmp_path):
    run = RunDir(tmp_path / "old").create()
    run.log_file.write_text("2026-01-01 10:00:00 stopped at step 3 (checkpoint saved); resume with --resume\n",
                            encoding="utf-8")
    assert run.log_lines() == [("2026-01-01 10:00:00 stopped at step 3 (checkpoint saved); resume with --resume",
                                None)]
    assert RunDir(tmp_path / "never").log_lines() == []


def test_an_error_without_its_event_drops_the_event_of_the_last_one(tmp_path):
    run = RunDir(tmp_path / "run").create()
    run.write_status(state="failed", **RunEvent("ended", checkpoint="step-2").as_error())
    status = run.read_status()
    assert status["error"].startswith("the training process ended") and status["error_event"]["kind"] == "ended"
    run.write_status(state="running", step=3)  # other fields leave the error and its event alone
    assert run.read_status()["error_event"] == {"kind": "ended", "checkpoint": "step-2"}
    run.write_status(state="failed", error="out of memory")
    assert run.read_status()["error"] == "out of memory" and run.read_status()["error_event"] is None


def test_a_stopped_run_logs_how_to_go_on_as_an_event(tmp_path, tokenizer_dir):
    config = make_config(tmp_path, [write_text_corpus(tmp_path)], model__tokenizer=str(tokenizer_dir), max_steps=6)

    def stop_at_2(step, total, info):
        if step == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    assert train(config, progress=stop_at_2)["state"] == "stopped"
    text, event = RunDir(tmp_path / "run").log_lines(1)[0]
    assert event == RunEvent("stopped", step=2)
    assert text.endswith(" stopped at step 2 (checkpoint saved); resume with --resume")  # the CLI's words, as before
