"""ONNX export: the graph runs in ONNX Runtime with its KV cache and decodes what PyTorch decodes.

Skipped where the ONNX packages are not installed (requirements.txt installs them, so CI runs these).
"""

import json
import re

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
onnx = pytest.importorskip("onnx")

from minimind import MiniMindForCausalLM  # noqa: E402
from minimind.cli import main  # noqa: E402
from minimind.commands.export import parse_formats  # noqa: E402
from minimind.errors import ExportError  # noqa: E402
from minimind.export import export, export_many  # noqa: E402
from minimind.export import onnx_runner  # noqa: E402
from minimind.export.onnx import EXTERNAL_DATA, export_graph, io_names, save_graph  # noqa: E402
from minimind.export.onnx_runner import GRAPH, QUANTIZED_GRAPH, OnnxCausalLM, graph_file  # noqa: E402
from minimind.export.verify import DEFAULT_EVAL_TEXT  # noqa: E402
from minimind.tokenizer import save_tokenizer  # noqa: E402
from helpers import tiny_config  # noqa: E402
from test_export import EVAL_TEXTS, trained_model_dir  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer):
    return trained_model_dir(tmp_path_factory, tokenizer)


def _graph(tmp_path, encoding: str = "rope", **overrides):
    """(PyTorch model, ONNX runner) for a random tiny model with `encoding` positions, traced to
    the folder's root (the layout of exports made before the onnx/ folder, which still load)."""
    torch.manual_seed(0)
    model = MiniMindForCausalLM(tiny_config(position_encoding=encoding, **overrides)).eval()
    export_graph(model, tmp_path / "model.onnx")
    model.config.save_pretrained(tmp_path)
    return model, OnnxCausalLM(tmp_path)


@pytest.fixture(scope="module")
def rope_graph(tmp_path_factory):
    """(model, runner, folder) of the default (RoPE) tiny model traced once for the tests that only
    read it: a trace takes 7-10 s."""
    folder = tmp_path_factory.mktemp("rope-graph")
    return (*_graph(folder), folder)


@torch.no_grad()
def _torch_greedy(model, prompt, n):
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt):]


def test_graph_inputs_and_outputs_are_the_decoder_with_past_layout(rope_graph):
    model, runner, folder = rope_graph
    config = model.config
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    inputs, outputs = io_names(config)
    assert [i.name for i in graph.graph.input] == inputs
    assert [o.name for o in graph.graph.output] == outputs
    assert inputs[:5] == ["input_ids", "attention_mask", "position_ids",
                          "past_key_values.0.key", "past_key_values.0.value"]
    assert outputs[:3] == ["logits", "present.0.key", "present.0.value"]

    def dims(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    shapes = {v.name: dims(v) for v in [*graph.graph.input, *graph.graph.output]}
    kv, hd = config.num_key_value_heads, config.head_dim
    assert shapes["input_ids"] == ["batch_size", "sequence_length"]
    assert shapes["attention_mask"] == ["batch_size", "past_sequence_length + sequence_length"]
    assert shapes["past_key_values.1.value"] == ["batch_size", kv, "past_sequence_length", hd]
    assert shapes["logits"] == ["batch_size", "sequence_length", config.vocab_size]
    assert shapes["present.1.key"] == ["batch_size", kv, "past_sequence_length + sequence_length", hd]

    # first call: empty past; the presents have the prompt's length and feed the next call
    ids = np.array([[5, 6, 7], [8, 9, 10]], dtype=np.int64)
    logits, present = runner.step(ids, np.ones((2, 3), np.int64), np.array([[0, 1, 2]] * 2), runner.empty_past(2))
    assert logits.shape == (2, 3, config.vocab_size) and len(present) == 2 * config.num_hidden_layers
    assert present[0].shape == (2, kv, 3, hd)
    logits, present = runner.step(ids[:, :1], np.ones((2, 4), np.int64), np.array([[3]] * 2), present)
    assert logits.shape == (2, 1, config.vocab_size) and present[3].shape == (2, kv, 4, hd)


@pytest.mark.parametrize("encoding", ["rope", "alibi", "sinusoidal", "learned"])
def test_greedy_through_the_kv_cache_equals_pytorch(tmp_path, encoding, rope_graph):
    model, runner = rope_graph[:2] if encoding == "rope" else _graph(tmp_path, encoding)
    prompt = [2, 17, 40, 99, 7, 300, 12]
    assert runner.generate_greedy(prompt, 32) == _torch_greedy(model, prompt, 32)


def test_logits_match_pytorch_on_a_padded_batch(rope_graph):
    model, runner, _ = rope_graph
    ids = torch.randint(5, 512, (2, 40), generator=torch.Generator().manual_seed(7))
    mask = torch.ones_like(ids)
    mask[1, :6] = 0
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask).logits
    got = runner(input_ids=ids, attention_mask=mask).logits
    keep = mask.bool()
    assert (got[keep] - want[keep]).abs().max() < 1e-4


def test_export_table_has_onnx_and_onnx_int8_rows(model_dir, tmp_path, capsys):
    eval_file = tmp_path / "heldout.txt"
    eval_file.write_text("\n".join(EVAL_TEXTS), encoding="utf-8")
    code = main(["export", "--model", str(model_dir), "--format", "onnx,onnx-int8", "--out", str(tmp_path / "x"),
                 "--eval-file", str(eval_file)])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("onnx")}
    assert re.search(r" [KMG]?B +[\d.]+ +[+-]0\.00% +32/32 ", rows["onnx"]), out  # float32: every token identical
    assert re.search(r" [+-][\d.]+% +\d+/32 ", rows["onnx-int8"]), out  # int8: agreement stated
    for fmt, graph, dtype in (("onnx", GRAPH, "fp32"), ("onnx-int8", QUANTIZED_GRAPH, "q8")):
        folder = tmp_path / "x" / fmt
        names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
        # the Hub's layout, one self-contained graph (no external data) under 2 GB
        assert {graph, "config.json", "generation_config.json", "tokenizer.json", "README.md"} <= names
        assert not {n for n in names if n.endswith((".data", "_data"))} and "model.onnx" not in names
        card = (folder / "README.md").read_text(encoding="utf-8")
        assert "Greedy through the KV cache" in card and "past_key_values.{i}.key" in card
        assert f"`{graph}`" in card and "/onnx/model.onnx'" in card  # the files row and the load hint
        config = json.loads((folder / "config.json").read_text())
        assert config["model_type"] == "llama" and config["transformers.js_config"] == {"dtype": dtype}
    assert (tmp_path / "x" / "onnx-int8" / QUANTIZED_GRAPH).stat().st_size < (tmp_path / "x" / "onnx" / GRAPH).stat().st_size


def test_export_result_states_the_cache_decode_and_logit_difference(model_dir, tmp_path):
    onnx_result, int8_result = export_many(model_dir, ["onnx", "onnx-int8"], tmp_path, eval_text=EVAL_TEXTS)
    assert onnx_result.verified and int8_result.verified, (onnx_result.error, int8_result.error)
    assert onnx_result.cached_greedy_match == 32 and onnx_result.greedy_match == 32
    assert onnx_result.logit_max_diff < 1e-3 and abs(onnx_result.delta) < 1e-4
    assert int8_result.cached_greedy_match is not None and abs(int8_result.delta) <= 0.02
    assert int8_result.logit_max_diff is None  # int8 is judged by agreement and perplexity, not logits


def test_an_alibi_model_exports_with_its_minimind_config(tmp_path, tokenizer):
    folder = tmp_path / "alibi"
    torch.manual_seed(0)
    MiniMindForCausalLM(tiny_config(position_encoding="alibi")).save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    result = export(folder, "onnx", tmp_path / "onnx", eval_text=EVAL_TEXTS)
    assert result.verified and result.cached_greedy_match == 32
    assert json.loads((tmp_path / "onnx" / "config.json").read_text())["position_encoding"] == "alibi"
    assert "MiniMind form" in result.stored_as


def test_mixture_of_experts_is_refused(tmp_path, tokenizer):
    folder = tmp_path / "moe"
    MiniMindForCausalLM(tiny_config(use_moe=True)).save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    with pytest.raises(ExportError, match="mixture-of-experts models cannot be exported to ONNX"):
        export(folder, "onnx", tmp_path / "onnx")
    assert "onnx" not in parse_formats("all", str(folder), None)


def test_missing_packages_name_the_install_command(model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(onnx_runner, "missing_packages", lambda: ["onnxruntime"])
    with pytest.raises(ExportError, match="needs onnxruntime .*pip install onnx==1.23.2 onnxscript==0.7.2 onnxruntime==1.32.0"):
        export(model_dir, "onnx-int8", tmp_path / "onnx-int8")
    assert not (tmp_path / "onnx-int8").exists()
    assert not [f for f in parse_formats("all", str(model_dir), None) if f.startswith("onnx")]


def test_a_graph_over_the_single_file_limit_keeps_its_weights_in_model_onnx_data(tmp_path, rope_graph):
    model, _, traced = rope_graph
    folder = tmp_path / "split"
    assert save_graph(traced / "model.onnx", folder / GRAPH, limit=0)
    assert sorted(p.name for p in (folder / "onnx").iterdir()) == ["model.onnx", EXTERNAL_DATA]
    graph = onnx.load(str(folder / GRAPH), load_external_data=False)
    locations = {e.value for t in graph.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {EXTERNAL_DATA}  # the name transformers.js fetches beside onnx/model.onnx
    model.config.save_pretrained(folder)
    prompt = [2, 17, 40, 99, 7, 300, 12]
    assert OnnxCausalLM(folder).generate_greedy(prompt, 16) == _torch_greedy(model, prompt, 16)
    assert not save_graph(traced / "model.onnx", tmp_path / "whole" / GRAPH)  # under the limit


def test_the_runner_finds_each_layout_and_names_what_it_looked_for(tmp_path):
    (tmp_path / "onnx").mkdir()
    with pytest.raises(ExportError, match=r"holds no ONNX graph \(looked for onnx/model.onnx, "
                                          r"onnx/model_quantized.onnx, model.onnx\); export the model again"):
        graph_file(tmp_path)
    for name in ("model.onnx", QUANTIZED_GRAPH, GRAPH):  # each found in turn, the float graph first
        (tmp_path / name).write_bytes(b"")
        assert graph_file(tmp_path) == tmp_path / name
    assert graph_file(tmp_path, QUANTIZED_GRAPH) == tmp_path / QUANTIZED_GRAPH


def test_cards_written_before_the_runner_moved_still_import_it():
    """ONNX folders exported before onnx_runner.py name `minimind.export.onnx.OnnxCausalLM` in
    their card; that import keeps giving the runner."""
    from minimind.export.onnx import OnnxCausalLM, OnnxClassifier, load_onnx

    assert (OnnxCausalLM, OnnxClassifier, load_onnx) == (onnx_runner.OnnxCausalLM, onnx_runner.OnnxClassifier,
                                                         onnx_runner.load_onnx)


def test_format_all_includes_onnx(model_dir):
    formats = parse_formats("all", str(model_dir), None)
    assert "onnx" in formats and "onnx-int8" in formats


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory, tokenizer):
    from minimind.classifier import MiniMindForSequenceClassification, label_maps

    folder = tmp_path_factory.mktemp("classifier")
    torch.manual_seed(0)
    config = tiny_config(**label_maps(["poem", "play", "letter"]))
    config.pad_token_id = tokenizer.pad_token_id
    MiniMindForSequenceClassification(config).eval().save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    return folder


def test_a_classifier_exports_with_its_labels(classifier_dir, tmp_path, capsys):
    code = main(["export", "--model", str(classifier_dir), "--format", "all", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("onnx")}
    assert set(rows) == {"onnx", "onnx-int8"}                 # "all" of a classifier: the ONNX formats
    n = len(DEFAULT_EVAL_TEXT)  # no held-out file and no run: the built-in lines
    assert re.search(rf"  -  +-  +{n}/{n}  ", rows["onnx"]), out  # no labels: no accuracy; every label as the source's
    assert re.search(r"^format +size +accuracy +delta +labels +path", out, re.M), out
    config = json.loads((tmp_path / "onnx" / "config.json").read_text())
    assert config["id2label"] == {"0": "poem", "1": "play", "2": "letter"}
    graph = onnx.load(str(tmp_path / "onnx" / GRAPH), load_external_data=False)
    assert [i.name for i in graph.graph.input] == ["input_ids", "attention_mask"]
    assert [o.name for o in graph.graph.output] == ["logits"]
    assert "Predicted labels" in (tmp_path / "onnx" / "README.md").read_text(encoding="utf-8")


def test_a_mean_pooling_classifier_exports_its_pooling(tokenizer, tmp_path):
    """The graph pools as the model does: a padded batch's logits match PyTorch's, each row's alone."""
    from minimind.classifier import MiniMindForSequenceClassification, label_maps

    torch.manual_seed(0)
    config = tiny_config(**label_maps(["poem", "play"]), classifier_pooling="mean")
    config.pad_token_id = tokenizer.pad_token_id
    model = MiniMindForSequenceClassification(config).eval()
    model.save_pretrained(tmp_path / "model")
    save_tokenizer(tokenizer, tmp_path / "model")
    export(str(tmp_path / "model"), "onnx", str(tmp_path / "onnx"))
    ids = torch.randint(3, 300, (3, 9))
    mask = torch.tensor([[1] * 9, [1] * 4 + [0] * 5, [0] * 6 + [1] * 3])
    ours = onnx_runner.load_onnx(tmp_path / "onnx")(input_ids=ids, attention_mask=mask).logits
    with torch.no_grad():
        reference = model(input_ids=ids, attention_mask=mask).logits
        alone = model(input_ids=ids[1:2, :4]).logits
    assert torch.allclose(ours, reference, atol=1e-4), (ours, reference)
    assert torch.allclose(ours[1], alone[0], atol=1e-4)


def test_a_classifier_is_refused_by_language_model_formats(classifier_dir, tmp_path):
    with pytest.raises(ExportError, match="a sequence classifier exports as onnx or onnx-int8"):
        export(classifier_dir, "gguf-q8_0", tmp_path / "gguf")


def test_a_labelled_held_out_file_gives_a_classifier_export_its_accuracy(classifier_dir, tmp_path, capsys):
    """`--eval-file` with text + label records: the table shows the export's accuracy, which is the
    classifier's own on those texts (measured here with `predict`, a different code path)."""
    from minimind.checkpoint import load_model, load_tokenizer_for
    from minimind.classifier import predict

    texts = [t for t in EVAL_TEXTS if t.strip()][:6]
    labels = ["poem", "play", "letter"] * 2
    held = tmp_path / "held.jsonl"
    held.write_text("".join(json.dumps({"text": t, "label": y}, ensure_ascii=False) + "\n"
                            for t, y in zip(texts, labels)), encoding="utf-8")
    code = main(["export", "--model", str(classifier_dir), "--format", "onnx", "--out", str(tmp_path / "x"),
                 "--eval-file", str(held)])
    out = capsys.readouterr().out
    assert code == 0, out
    probabilities = predict(load_model(classifier_dir), load_tokenizer_for(classifier_dir), texts)
    expected = sum(max(p, key=p.get) == y for p, y in zip(probabilities, labels)) / len(labels)
    assert f"source accuracy {expected:.2%} on held.jsonl" in out, out
    row = next(line for line in out.splitlines() if line.startswith("onnx"))
    assert f" {expected:.2%} " in row and " +0.00 pt " in row and " 6/6 " in row, out
    card = (tmp_path / "x" / "onnx" / "README.md").read_text(encoding="utf-8")
    assert f"Held-out accuracy | {expected:.2%} (source {expected:.2%})" in card
    config = json.loads((tmp_path / "x" / "onnx" / "config.json").read_text())
    assert config["use_cache"] is False  # the classifier graph takes no KV cache


def test_an_unverified_classifier_export_is_still_described_as_a_classifier(classifier_dir, tmp_path):
    result = export(classifier_dir, "onnx", tmp_path / "onnx", verify=False)
    assert result.classifier and "sequence classifier" in result.stored_as
    card = (tmp_path / "onnx" / "README.md").read_text(encoding="utf-8")
    assert "input_ids, attention_mask" in card and "past_key_values" not in card


def test_labels_must_match_the_texts(classifier_dir, tmp_path):
    with pytest.raises(ExportError, match="one label per non-empty text"):
        export(classifier_dir, "onnx", tmp_path / "onnx", eval_text=["a", "b"], eval_labels=["poem"])
    with pytest.raises(ExportError, match="give both"):
        export(classifier_dir, "onnx", tmp_path / "onnx", eval_labels=["poem"])
