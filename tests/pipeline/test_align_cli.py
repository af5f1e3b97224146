"""``rag-eval align`` end to end on the FiQA example: 20 labels from the stand-in annotator, the
comparison printed, the aligned weights (offline) or examples (an LLM judge on the scripted server)
written, a run with ``--verifier`` judged and recorded under the variant's name, a run without it under
the default judge's."""
import csv
import json
import re

import pandas as pd
import pytest

from rag_eval.metrics.judges.examples import Examples, read_variant
from rag_eval.metrics.judges.verifier import Verifier
from tests.conftest import FIQA, TEST_KEY
from tests.pipeline.test_labels import fill

pytestmark = pytest.mark.slow


def test_align_then_run_with_and_without_the_variant(tmp_path, monkeypatch, capsys):
    from rag_eval.orchestration import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert cli.main(["annotate", "export", str(FIQA), "-n", "20"]) == 0
    version = re.search(r"registered dataset version (\S+)", capsys.readouterr().err)[1]
    assert cli.main(["align", version]) == 2
    assert f"error: dataset version {version} has no usable faithfulness labels: label some rows" in capsys.readouterr().err
    fill(tmp_path / "annotate" / f"{version}.csv", 20)
    assert cli.main(["annotate", "import", str(tmp_path / "annotate" / f"{version}.csv")]) == 0
    capsys.readouterr()

    assert cli.main(["align", version]) == 0
    out = capsys.readouterr().out
    assert "verifier aligned on 20 faithfulness labels (0 refused), 5-fold cross-fitted" in out
    assert re.search(r"^shipped .*\[\d\.\d{3}, \d\.\d{3}\]", out, re.M) and re.search(r"^aligned ", out, re.M)
    written = tmp_path / re.search(r"wrote (\S+) \(judge", out)[1]
    variant = Verifier(written)
    assert variant.name == "aligned" and f"(judge 9+aligned-{variant.version})" in out

    assert cli.main(["run", str(FIQA), "--verifier", str(written)]) == 0
    summary = json.loads((tmp_path / "out" / version / "summary.json").read_text(encoding="utf-8"))
    assert summary["judge"]["version"] == f"9+aligned-{variant.version}"
    assert summary["judge"]["verifier_threshold"] == variant.threshold
    assert f"— judge offline-heuristic+aligned-{variant.version}, scale" in capsys.readouterr().out  # the table names it
    results = pd.read_parquet(tmp_path / "out" / version / "results.parquet")
    assert set(results["judge"]) == {f"offline-heuristic+aligned-{variant.version}"}  # every row names the variant
    aligned_mean = summary["metrics"]["faithfulness"]["mean"]
    assert cli.main(["run", str(FIQA)]) == 0  # the shipped judge again: judged, not "up to date"
    summary = json.loads((tmp_path / "out" / version / "summary.json").read_text(encoding="utf-8"))
    assert summary["judge"]["version"] == f"9+verifier-{Verifier().version}"
    assert summary["metrics"]["faithfulness"]["mean"] != aligned_mean
    assert cli.main(["run", str(FIQA), "--verifier", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: cannot read the verifier's weights" in capsys.readouterr().err


def test_align_an_llm_judge_then_run_with_and_without_its_examples(tmp_path, monkeypatch, capsys):
    from rag_eval.orchestration import cli
    from rag_eval.orchestration.judge_sim import JudgeServer

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    server = JudgeServer().start()  # every verdict 1: wrong exactly on the rows labelled 'fail'
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("OPENAI_MODEL", "judge-test")
    try:
        assert cli.main(["annotate", "export", str(FIQA), "-n", "20"]) == 0
        version = re.search(r"registered dataset version (\S+)", capsys.readouterr().err)[1]
        sheet = tmp_path / "annotate" / f"{version}.csv"
        fill(sheet, 20)
        with sheet.open(encoding="utf-8-sig") as handle:
            fails = [row["response"] for row in csv.DictReader(handle) if row["label"] == "fail"]
        assert cli.main(["annotate", "import", str(sheet)]) == 0
        capsys.readouterr()

        assert cli.main(["align", version, "--examples", "2"]) == 0
        out = capsys.readouterr().out
        assert "llm:judge-test given up to 2 examples of its mistakes on 20 faithfulness labels (0 refused)" in out
        accuracy = f"{1 - len(fails) / 20:.3f}"  # every row judged 1.0: right on the passing labels only
        assert re.search(rf"^default +0\.500 +{accuracy} ", out, re.M) and re.search(rf"^aligned +0\.500 +{accuracy} ", out, re.M)
        written = tmp_path / re.search(r"wrote (\S+) \(judge", out)[1]
        variant = read_variant(written)
        assert isinstance(variant, Examples) and len(variant) == min(2, len(fails)) > 0
        assert f"(judge llm:judge-test+{variant.label}, {len(variant)} examples)" in out
        assert all(" ".join(e.statements) in " ".join(fails) for e in variant.examples)
        assert cli.main(["align", version, "--examples", "0"]) == 2
        assert "k (examples) must be at least 1" in capsys.readouterr().err

        sent = len(server.chat_requests())
        assert cli.main(["run", str(FIQA), "--metrics", "faithfulness", "--verifier", str(written)]) == 0
        summary = json.loads((tmp_path / "out" / version / "summary.json").read_text(encoding="utf-8"))
        assert summary["judge"]["judge"] == f"llm:judge-test+{variant.label}" and summary["judge"]["examples"] == variant.label
        new = server.chat_requests()[sent:]
        assert new and all(seen.prompt.startswith(variant.prefix) for seen in new)  # no default judgement re-asked
        sent = len(server.chat_requests())
        assert cli.main(["run", str(FIQA), "--metrics", "faithfulness", "--verifier", str(written), "--force"]) == 0
        assert len(server.chat_requests()) == sent  # cached under the variant's own name
        capsys.readouterr()
        assert cli.main(["run", str(FIQA), "--metrics", "faithfulness"]) == 0  # the default judge: align judged it all
        assert "this run sent: 0 chat" in capsys.readouterr().out and len(server.chat_requests()) == sent
        summary = json.loads((tmp_path / "out" / version / "summary.json").read_text(encoding="utf-8"))
        assert summary["judge"]["judge"] == "llm:judge-test" and "examples" not in summary["judge"]

        assert cli.main(["run", str(FIQA), "--verifier", str(Verifier().path)]) == 2
        assert "holds the offline verifier's weights, and the judge is an LLM" in capsys.readouterr().err
        monkeypatch.delenv("OPENAI_BASE_URL")
        monkeypatch.delenv("OPENAI_API_KEY")
        assert cli.main(["run", str(FIQA), "--verifier", str(written)]) == 2
        assert "holds the LLM judge's examples, and the judge is the offline one" in capsys.readouterr().err
        assert cli.main(["align", version, "--examples", "3"]) == 2
        assert "--examples applies to an LLM judge" in capsys.readouterr().err
    finally:
        server.stop()
