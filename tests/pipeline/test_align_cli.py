"""``rag-eval align`` end to end on the FiQA example: 20 labels from the stand-in annotator, the
comparison printed, the aligned weights written, a run with ``--verifier`` judged and recorded
under the variant's name, a run without it under the shipped verifier's."""
import json
import re

import pytest

from rag_eval.metrics.judges.verifier import Verifier
from tests.conftest import FIQA
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
    assert f"error: dataset version {version} has no faithfulness labels" in capsys.readouterr().err
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
    aligned_mean = summary["metrics"]["faithfulness"]["mean"]
    capsys.readouterr()
    assert cli.main(["run", str(FIQA)]) == 0  # the shipped judge again: judged, not "up to date"
    summary = json.loads((tmp_path / "out" / version / "summary.json").read_text(encoding="utf-8"))
    assert summary["judge"]["version"] == f"9+verifier-{Verifier().version}"
    assert summary["metrics"]["faithfulness"]["mean"] != aligned_mean
    assert cli.main(["run", str(FIQA), "--verifier", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: cannot read the verifier's weights" in capsys.readouterr().err
