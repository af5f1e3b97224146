"""The house: import cycles and wrong-way imports (``tools/import_cycles.py``), no state made at
import, and the optional extras (``rag_eval.metrics.core.extras``), each missing one named with the command
that installs it. A missing package is simulated as Python does for a module set to ``None`` in ``sys.modules``."""
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from rag_eval.metrics.core.extras import MissingExtra, require

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import import_cycles  # noqa: E402 - a script, not a package

TREE = {
    "metrics/__init__.py": "",
    "metrics/a.py": "from rag_eval.metrics import b\n",
    "metrics/b.py": "def later():\n    import rag_eval.metrics.a\n",  # a deferred import still makes a cycle
    "metrics/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rag_eval.metrics.a import X\n"
                    "    from rag_eval.assets.x import Y\n",
    "metrics/d.py": "import rag_eval.metrics.c\n",
    "assets/__init__.py": "",
    "assets/x.py": "from . import y\nimport rag_eval.orchestration.cli\n",
    "assets/y.py": "from rag_eval.metrics.d import Z\n",
    "orchestration/__init__.py": "",
    "orchestration/cli.py": "import rag_eval.assets.x\n",
}


def test_the_script_prints_each_cycle_and_each_wrong_way_import_and_exits_1(tmp_path, capsys):
    for name, text in TREE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert import_cycles.main([str(tmp_path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "import cycle: rag_eval.assets.x (line 2) -> rag_eval.orchestration.cli (line 1) -> rag_eval.assets.x",
        "import cycle: rag_eval.metrics.a (line 1) -> rag_eval.metrics.b (line 2) -> rag_eval.metrics.a",
        # Only run-time imports make cycles (metrics.c's of metrics.a is under TYPE_CHECKING), but every
        # import must point the right way.
        "wrong-way import: rag_eval.assets.x:2 imports rag_eval.orchestration.cli (assets must not import "
        "orchestration)",
        "wrong-way import: rag_eval.metrics.c:4 imports rag_eval.assets.x (metrics must not import assets)",
        "10 modules, 9 imports: 4 problem(s)"]


def test_every_package_folder_is_installed_under_rag_eval():
    """pyproject.toml lists each folder holding an __init__.py as a package of rag_eval (a folder left
    out would be missing from a regular install, though an editable one would find it)."""
    import tomllib

    settings = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = {str(p.parent.relative_to(ROOT)).replace("/", ".") for top in ("metrics", "assets", "orchestration")
               for p in (ROOT / top).rglob("__init__.py")}
    assert sorted(settings["packages"]) == sorted(f"rag_eval.{f}" for f in folders)
    assert settings["package-dir"] == {f"rag_eval.{top}": top for top in ("metrics", "assets", "orchestration")}


#: The longest a module of the product may be (issue 36: a newcomer reads a module whole).
MODULE_LINES = 400


def test_no_module_of_the_product_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for top in ("metrics", "assets", "orchestration")
            for p in sorted((ROOT / top).rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MODULE_LINES}
    assert long == {}


#: Run in a fresh interpreter: records every TOML file opened and refuses to build the metric registry.
NO_STATE = """
import sys
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" and
                 str(args[0]).endswith(".toml") else None)
import rag_eval.metrics.core.registry as registry

def built():
    raise AssertionError("the metric registry was built at import")

registry._builtin = built
import rag_eval.assets.traffic, rag_eval.orchestration.traffic
print(opened)
"""


def test_importing_the_traffic_room_reads_no_file_and_builds_no_registry(tmp_path):
    # Where the working folder's pyproject.toml is not even TOML, the modules import all the same:
    # the settings are read, and the assets made, by build_definitions() and `rag-eval traffic`.
    (tmp_path / "pyproject.toml").write_text("[tool.rag_eval.traffic\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", NO_STATE], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]"]


def test_the_cli_module_imports_without_the_metrics():
    # `rag-eval` installs its Ctrl-C and SIGTERM handlers once rag_eval.orchestration.cli is imported: the metrics
    # (a second to import) must come later, or a Ctrl-C in that second prints a traceback (test_crash.py).
    done = subprocess.run([sys.executable, "-c", "import sys, rag_eval.orchestration.cli; "
                           "print(sorted(m for m in sys.modules if m.startswith('rag_eval.metrics')))"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]"]


def test_a_missing_extra_is_named_with_its_install_command_a_broken_one_is_not(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(MissingExtra) as caught:
        require("pyspark", "spark", "Spark execution")
    assert str(caught.value) == "Spark execution needs the 'spark' extra: pip install 'rag-eval-pipeline[spark]'"
    assert isinstance(caught.value, ValueError)  # the CLI says `error: ...`, exit status 2
    monkeypatch.setitem(sys.modules, "json.decoder", None)  # installed, but what it imports is broken
    monkeypatch.delitem(sys.modules, "json")
    with pytest.raises(ImportError) as broken:
        require("json", "report", "JSON")
    assert not isinstance(broken.value, MissingExtra)


def test_without_pypdf_a_pdf_is_skipped_naming_the_extra(tmp_path, monkeypatch):
    from rag_eval.metrics.sources.testset import read_documents

    monkeypatch.setitem(sys.modules, "pypdf", None)
    (tmp_path / "manual.pdf").write_bytes(b"%PDF-1.4\n")
    (tmp_path / "notes.md").write_text("Chains wear out and need replacing every few thousand km.\n", encoding="utf-8")
    documents, skipped = read_documents(tmp_path)
    assert [d.id for d in documents] == ["notes.md"]
    assert skipped == {"manual.pdf": "Reading PDF documents needs the 'testset' extra: "
                                     "pip install 'rag-eval-pipeline[testset]'"}


def test_without_matplotlib_report_html_keeps_its_tables_and_says_how_to_get_the_charts(monkeypatch):
    from rag_eval.metrics.stats.compare import compare
    from rag_eval.metrics.reports.gate_report import html_report, version_stats

    def frame(shift: float) -> pd.DataFrame:
        return pd.DataFrame({"sample_id": [f"q{i}" for i in range(10)], "metric": "faithfulness", "status": "ok",
                             "value": [0.1 * i - shift for i in range(10)], "reason": "", "chat_requests": 1,
                             "embedding_requests": 0, "prompt_tokens": 9, "completion_tokens": 1, "cache_hits": 0})

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    comparison = compare(frame(0.0), frame(0.1), names=("a", "b"))
    history = [version_stats(name, frame(shift), ["faithfulness"]) for name, shift in (("a", 0.0), ("b", 0.1))]
    page = html_report(comparison, history)
    assert "<svg" not in page and "<h2>Comparison</h2>" in page and "regressed" in page
    assert page.count("<p class='small'>Drawing the charts of report.html needs the &#x27;report&#x27; extra: pip install "
                      "&#x27;rag-eval-pipeline[report]&#x27;</p>") == 2  # trend and cost


def test_without_matplotlib_the_traffic_page_keeps_its_tables_and_says_how_to_get_the_charts(monkeypatch):
    """The traffic tutorial's first run, installed with the `traces` extra only, failed as an internal error."""
    from rag_eval.metrics.reports.traffic_report import traffic_html

    day = {"partition": "2026-11-02", "traces": 100, "sampled": 60, "problems": 0, "latency_ms": {"p50": 12.0},
           "system_tokens": {"total_tokens": 900}, "judging_cost": {"chat_requests": 3}, "worst_rows": {},
           "metrics": {"faithfulness": {"mean": 0.5, "low": 0.4, "high": 0.6, "n": 60, "rows": 60, "published": "mean"}},
           "drift": {}}
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    page = traffic_html([day], "2026-11-02")
    assert "<svg" not in page and "<td>2026-11-02</td><td>100</td><td>60</td><td>0</td><td>12</td>" in page
    assert page.count("<p class='small'>Drawing the charts of report.html needs the &#x27;report&#x27; extra: pip install "
                      "&#x27;rag-eval-pipeline[report]&#x27;</p>") == 3  # trend, volume and cost
