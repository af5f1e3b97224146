"""Keys travel only through the environment: never in the Dagster instance (run config,
snapshots, events), the reports, DuckDB, the datasets or the judgement cache (issue 9
point 6, issue 10 point 5)."""
import json
from pathlib import Path

import pandas as pd

from tests.conftest import readable

SECRET = "sk-secret-TRAVELS-ONLY-IN-ENV-not-a-real-key"
ROWS = [{"id": f"q{i}", "user_input": f"Where was person {i} born?", "response": f"Person {i} was born in Ulm.",
         "retrieved_contexts": [f"Person {i} was born in Ulm, Germany."], "reference": "Ulm."} for i in range(3)]


def holding(root: Path, secret: str) -> list[str]:
    return [str(p.relative_to(root)) for p in sorted(root.rglob("*"))
            if p.is_file() and any(secret.encode() in text for text in readable(p))]


def test_a_base_url_with_a_key_is_refused_and_a_key_from_the_environment_is_stored_nowhere(
        server, tmp_path, monkeypatch, capsys):
    from rag_eval.orchestration import cli

    dataset = tmp_path / "in" / "samples.jsonl"
    dataset.parent.mkdir()
    dataset.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    host = server.url.removeprefix("http://")
    for url in (f"http://user:{SECRET}@{host}", f"{server.url}?api_key={SECRET}"):
        assert cli.main(["run", str(dataset), "--base-url", url]) == 2
        error = capsys.readouterr().err
        assert "carries credentials" in error and "OPENAI_API_KEY" in error and SECRET not in error
    assert not (tmp_path / "datasets").exists() and server.seen == [] and server.probes == []

    # The provider requires the key and echoes it in every reason it writes.
    server.api_key = SECRET
    base = server.script

    def echo(seen):
        reply = base(seen)
        if reply.content:
            reply.content = reply.content.replace("scripted reason", f"scripted reason (key {SECRET})")
        return reply

    server.script = echo
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    assert cli.main(["run", str(dataset), "--base-url", server.url, "--dataset-version", "v1"]) == 0
    assert len(server.chat_requests()) == 5 * 3  # judged for real, with the key
    results = pd.read_parquet(tmp_path / "out" / "v1" / "results.parquet")
    assert results["details"].str.contains(r"\(key \[redacted\]\)").any()
    assert holding(tmp_path, SECRET) == []  # DAGSTER_HOME, out/, datasets/, .rag_eval_cache/
