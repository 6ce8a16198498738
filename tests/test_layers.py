"""The package reads bottom-up: every module imports only from its own layer or the layers
below it, at the top of the file, so a reader (and Python) meets each module after what
it uses. A function-level import hides an edge from readers and tools, and is how the
21-module import loop grew unseen; only the commented allow-list below may do it.

Read from the source (AST), not by importing, so a loop or a heavy import cannot hide."""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "minimind"

# bottom to top; a module belongs to the longest prefix that names it (a new module must be placed)
LAYERS = [
    ["minimind.errors"],
    # leaves: pure helpers every layer above may use
    ["minimind.config", "minimind.chat_format", "minimind.sampling_params", "minimind.byte_level",
     "minimind.attention", "minimind.hardware", "minimind.language", "minimind.llama_shape"],
    # reading corpora and tokenizers
    ["minimind.data", "minimind.vocabulary", "minimind.tokenizer"],
    # the models (the package itself registers them with transformers' Auto classes)
    ["minimind.model", "minimind.lstm", "minimind.classifier", "minimind"],
    # ... and the model half of a GGUF file, which the export and the engine's llama.cpp draft write
    ["minimind.checkpoint", "minimind.evaluate", "minimind.hub", "minimind.gguf_model"],
    ["minimind.inference"],
    ["minimind.generation"],
    ["minimind.registry"],
    ["minimind.training", "minimind.serving", "minimind.export"],
    ["minimind.commands", "minimind.cli", "minimind.__main__"],
]

# The modules whose function-level imports of minimind modules stay, each with why.
LAZY_MODULES = {
    # the command line loads only the command it runs: `chat` or `--help` need not import the
    # trainer, the server and the exporters (datasets, peft, fastapi), about 3 s here
    "minimind.cli", "minimind.commands",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported minimind module, line, inside a function) for each import in `path`."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def visit(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, inner) for a in child.names if a.name.split(".")[0] == "minimind")
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target.split(".")[0] == "minimind":
                    # `from minimind.x import y` may name a submodule y: count it as that module
                    for alias in child.names:
                        sub = f"{target}.{alias.name}"
                        found.append((sub if (PACKAGE.parent / sub.replace(".", "/")).with_suffix(".py").is_file()
                                      or (PACKAGE.parent / sub.replace(".", "/")).is_dir() else target,
                                      child.lineno, inner))
            else:
                visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return list(dict.fromkeys(found))


def _layer(module: str) -> int:
    best, layer = -1, None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            # the root names only the package's __init__, so a new module must be placed
            inside = module.startswith(prefix + ".") and prefix != "minimind"
            if (module == prefix or inside) and len(prefix) > best:
                best, layer = len(prefix), index
    assert layer is not None, f"{module} is in no layer: add it to LAYERS"
    return layer


def _lazy_allowed(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in LAZY_MODULES)


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_imports_only_its_own_layer_or_lower():
    upward = []
    for path in MODULES:
        module = _module_name(path)
        for target, line, _ in _imports(path):
            if _layer(target) > _layer(module):
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} {module} (layer {_layer(module)}) "
                              f"imports {target} (layer {_layer(target)})")
    assert not upward, "imports that go up a layer:\n" + "\n".join(upward)


def test_imports_of_minimind_modules_sit_at_the_top_of_the_file():
    hidden = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {target} inside a function"
              for path in MODULES for target, line, inner in _imports(path)
              if inner and not _lazy_allowed(_module_name(path))]
    assert not hidden, "move these to the top of their file (or, with a reason, into LAZY_MODULES):\n" + "\n".join(hidden)


def _graph() -> dict[str, set[str]]:
    """Module -> the minimind modules importing it runs, counting function-level imports."""
    graph = {_module_name(p): {t for t, _, _ in _imports(p)} for p in MODULES}
    for module, targets in graph.items():
        # importing a.b.c runs a.b first; the root `minimind` runs first for every module, an
        # edge of Python's that every module shares, so only explicit imports of the root count
        # (and a package's own modules run inside its __init__, so their edge to it is none)
        parents = {".".join(t.split(".")[:i]) for t in targets for i in range(2, t.count(".") + 1)}
        parents = {q for q in parents if not module.startswith(q + ".")}
        graph[module] = {t for t in targets | parents if t in graph and t != module}
    return graph


def _loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, loops = {}, {}, [], set(), []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                loops.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return loops


def test_the_loop_finder_finds_a_loop_through_a_function_level_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _loops(graph) == [["a", "b", "c"]] and _loops({**graph, "c": set()}) == []


def test_no_module_imports_itself_through_others():
    assert not _loops(_graph()), f"import loops: {_loops(_graph())}"


def test_every_module_imports_in_a_fresh_interpreter_in_layer_order():
    names = sorted((_module_name(p) for p in MODULES if p.name != "__main__.py"), key=_layer)
    code = f"import importlib\nfor name in {names!r}:\n    importlib.import_module(name)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
