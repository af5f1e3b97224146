"""Bounded input (issue 37): a YAML alias bomb in a configuration file is refused in a line, error
messages quote at most a few hundred characters of any value, and reports are never written through
a symbolic link planted at ``out/<version>`` out of the output folder."""
import gzip
import os
import subprocess
import sys
import time

import pytest

from rag_eval.assets.resources import ReportStore
from rag_eval.metrics.core.bounded import MAX_QUOTE, MAX_YAML_VALUES, load_yaml
from rag_eval.metrics.core.custom import load_custom_metrics
from rag_eval.metrics.errors import StorageError
from rag_eval.metrics.sources.targets.config import TargetConfigError, load_config


def alias_bomb(levels: int = 9) -> str:
    """The billion laughs in YAML: 9 ** ``levels`` strings from a file of about 1 KB."""
    lines, previous = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'], "a"
    for name in "bcdefghijk"[:levels - 1]:
        lines.append(f"{name}: &{name} [{', '.join(['*' + previous] * 9)}]")
        previous = name
    return "\n".join(lines) + "\n"


BOMB_MESSAGE = (f"its anchors and aliases expand to more than {MAX_YAML_VALUES:,} values (an alias bomb?): "
                "refused; write the values out, or reuse fewer")


def test_an_alias_bomb_of_custom_metrics_is_refused_in_a_line_at_once(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb() + "metrics:\n  - name: *i\n", encoding="utf-8")
    assert len(path.read_bytes()) < 1200
    started = time.monotonic()
    with pytest.raises(ValueError) as refused:
        load_custom_metrics(path)
    assert str(refused.value) == f"{path}: {BOMB_MESSAGE}" and time.monotonic() - started < 2
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAG_EVAL_"))}
    done = subprocess.run([sys.executable, "-m", "rag_eval.orchestration.cli", "run", "--custom-metrics", str(path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # a fresh registry
    assert done.returncode == 2 and done.stderr == f"error: {path}: {BOMB_MESSAGE}\n"


def test_an_alias_inside_its_own_anchor_is_refused_and_shared_anchors_are_read():
    with pytest.raises(ValueError, match="alias bomb"):
        load_yaml("a: &a [1, *a]\n", "loop.yaml")
    assert load_yaml("x: &x {k: 1}\ny: *x\n", "ok.yaml") == {"x": {"k": 1}, "y": {"k": 1}}
    assert load_yaml("", "empty.yaml") is None


def test_a_large_value_in_a_wrong_field_is_quoted_short(tmp_path):
    path = tmp_path / "custom.yaml"
    items = ", ".join(f'"item {i:05d} {"x" * 40}"' for i in range(20_000))  # under the alias limit, ~1 MB
    path.write_text(f"metrics:\n  - name: big\n    kind: aspect_critic\n    fields: [response]\n"
                    f"    definition: [{items}]\n", encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        load_custom_metrics(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: metric 'big' (entry 1): field '") and "field 'definition': " in message
    assert "item 00000" in message
    assert len(message) < len(str(path)) + 200 + MAX_QUOTE and "item 19999" not in message


def test_an_alias_bomb_and_a_large_value_of_a_target_configuration_are_bounded(tmp_path):
    bomb = tmp_path / "targets.yaml"
    bomb.write_text("questions: q.jsonl\n" + alias_bomb(), encoding="utf-8")
    with pytest.raises(TargetConfigError) as refused:
        load_config(bomb)
    assert str(refused.value) == f"{bomb}: {BOMB_MESSAGE}"
    large = tmp_path / "large.yaml"
    large.write_text("questions: q.jsonl\nsystem: {callable: [" + ", ".join(['"' + "y" * 50 + '"'] * 20_000) + "]}\n",
                     encoding="utf-8")
    with pytest.raises(TargetConfigError) as refused:
        load_config(large)
    assert str(refused.value).startswith(f"{large}: ") and len(str(refused.value)) < len(str(large)) + 400


def test_reports_are_never_written_through_a_symlink_out_of_the_output_folder(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "v1").symlink_to(elsewhere)
    store = ReportStore(root=str(out))
    with pytest.raises(StorageError) as refused:
        store.folder("v1")
    assert str(refused.value) == (f"{out / 'v1'}: a symbolic link out of the output folder {out} (to {elsewhere}); "
                                  "reports are written inside the output folder only: remove the link, then run again")
    (out / "v2").symlink_to(tmp_path / "missing")  # dangling: refused too, nothing made there
    with pytest.raises(StorageError):
        store.folder("v2")
    assert not (tmp_path / "missing").exists() and list(elsewhere.iterdir()) == []
    (out / "inside").mkdir()
    (out / "v3").symlink_to(out / "inside")  # a link that stays inside the output folder is a folder of it
    assert store.folder("v3") == out / "v3" and store.folder("v4").is_dir()


def test_a_version_name_too_long_is_refused_with_the_length_limit(tmp_path, monkeypatch, capsys):
    from rag_eval.orchestration import cli
    from tests.conftest import FIQA

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    name = "v" * 300
    assert cli.main(["register", str(FIQA), "--dataset-version", name]) == 2
    assert capsys.readouterr().err == (f"error: dataset version '{'v' * 60}…' (300 characters): at most 128 characters "
                                       "(it names a folder and a partition)\n")
    assert not (tmp_path / "datasets").exists() or not any((tmp_path / "datasets").iterdir())


@pytest.mark.parametrize("encode, what", [
    (lambda text: gzip.compress(text.encode("utf-8")),
     "a gzip-compressed file, not JSON lines: decompress it first (gunzip), then pass the .jsonl file"),
    (lambda text: text.encode("utf-16"), "UTF-16 text, not UTF-8: convert it first (iconv -f UTF-16-LE -t UTF-8)"),
    (lambda text: text.encode("utf-16-be"), "UTF-16 text, not UTF-8: convert it first (iconv -f UTF-16-BE -t UTF-8)")])
def test_a_gzip_or_utf16_file_is_said_once_as_what_it_is(tmp_path, monkeypatch, capsys, encode, what):
    from rag_eval.metrics.core.samples import load_samples
    from rag_eval.metrics.errors import InputError
    from rag_eval.orchestration import cli
    from tests.conftest import FIQA

    path = tmp_path / "samples.jsonl"
    path.write_bytes(encode(FIQA.read_text(encoding="utf-8")))
    with pytest.raises(InputError) as refused:
        load_samples(path)
    assert str(refused.value) == f"{path}: {what}"
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["register", str(path)]) == 2
    assert capsys.readouterr().err == f"error: {path}: {what}; nothing registered\n"
