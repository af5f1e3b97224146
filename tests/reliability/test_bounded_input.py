"""Bounded input (issue 37): a YAML alias bomb in a configuration file is refused in a line, error
messages quote at most a few hundred characters of any value, and reports are never written through
a symbolic link planted at ``out/<version>`` out of the output folder."""
import gzip
import os
import subprocess
import sys

import pytest

from rag_eval.assets.resources import ReportStore
from rag_eval.metrics.core.bounded import MAX_QUOTE, MAX_YAML_CHARS, MAX_YAML_TEXT, MAX_YAML_VALUES, load_yaml
from rag_eval.metrics.core.custom import load_custom_metrics
from rag_eval.metrics.core.settings import tool_section
from rag_eval.metrics.errors import StorageError
from rag_eval.metrics.sources.targets.config import load_config
from rag_eval.metrics.sources.targets.config_file import TargetConfigError


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
    with pytest.raises(ValueError) as refused:
        load_custom_metrics(path)
    assert str(refused.value) == f"{path}: {BOMB_MESSAGE}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAG_EVAL_"))}
    done = subprocess.run([sys.executable, "-m", "rag_eval.orchestration.cli", "run", "--custom-metrics", str(path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # a fresh registry
    assert done.returncode == 2 and done.stderr == f"error: {path}: {BOMB_MESSAGE}\n"


def test_a_large_file_without_aliases_is_refused_by_its_size_at_once_not_as_an_alias_bomb(tmp_path):
    """A plain 300,000-entry file took 46 s and 860 MB to be called an alias bomb: its text is too long (its
    bytes, counted as the file is read: ASCII, as many as its characters), which is said before any YAML is parsed
    (the time it takes is bench/ matter, not a test's)."""
    path = tmp_path / "custom.yaml"
    path.write_text("metrics: []\n" + "".join(f"k{i}: {i}\n" for i in range(300_000)), encoding="utf-8")
    size = len(path.read_text(encoding="utf-8"))
    assert size > MAX_YAML_TEXT
    with pytest.raises(ValueError) as refused:
        load_custom_metrics(path)
    assert str(refused.value) == (f"{path}: {size:,} bytes, more than a configuration file may hold "
                                  f"({MAX_YAML_TEXT:,}): refused; keep long data (questions, documents) in their own "
                                  "files")
    many = "[" + ", ".join(["1"] * (MAX_YAML_VALUES + 1)) + "]"  # within the text limit, no alias: its real count
    assert len(many) < MAX_YAML_TEXT
    with pytest.raises(ValueError) as refused:
        load_yaml(many, "many.yaml")
    assert str(refused.value) == (f"many.yaml: it holds more than {MAX_YAML_VALUES:,} values, more than a "
                                  "configuration file may: refused")


def test_an_alias_inside_its_own_anchor_is_refused_and_shared_anchors_are_read():
    with pytest.raises(ValueError, match="alias bomb"):
        load_yaml("a: &a [1, *a]\n", "loop.yaml")
    assert load_yaml("x: &x {k: 1}\ny: *x\n", "ok.yaml") == {"x": {"k": 1}, "y": {"k": 1}}
    assert load_yaml("", "empty.yaml") is None


def test_a_large_value_in_a_wrong_field_is_quoted_short(tmp_path):
    path = tmp_path / "custom.yaml"
    items = ", ".join(f'"item {i:05d} {"x" * 40}"' for i in range(15_000))  # under the limits, ~0.8 MB
    path.write_text(f"metrics:\n  - name: big\n    kind: aspect_critic\n    fields: [response]\n"
                    f"    definition: [{items}]\n", encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        load_custom_metrics(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: metric 'big' (entry 1): field '") and "field 'definition': " in message
    assert "item 00000" in message
    assert len(message) < len(str(path)) + 200 + MAX_QUOTE and "item 14999" not in message


def test_an_alias_bomb_and_a_large_value_of_a_target_configuration_are_bounded(tmp_path):
    bomb = tmp_path / "targets.yaml"
    bomb.write_text("questions: q.jsonl\n" + alias_bomb(), encoding="utf-8")
    with pytest.raises(TargetConfigError) as refused:
        load_config(bomb)
    assert str(refused.value) == f"{bomb}: {BOMB_MESSAGE}"
    large = tmp_path / "large.yaml"
    large.write_text("questions: q.jsonl\nsystem: {callable: [" + ", ".join(['"' + "y" * 50 + '"'] * 15_000) + "]}\n",
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
                                  "rag-eval writes inside the output folder only: remove the link, then run again")
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
    (lambda text: text.encode("utf-16-be"), "UTF-16 text, not UTF-8: convert it first (iconv -f UTF-16-BE -t UTF-8)"),
    *[(lambda text, codec=codec: ("\ufeff" + text).encode(codec),
       "UTF-32 text, not UTF-8: convert it first (iconv -f UTF-32 -t UTF-8, which reads the mark)")
      for codec in ("utf-32-le", "utf-32-be")]])
def test_a_gzip_utf16_or_utf32_file_is_said_once_as_what_it_is(tmp_path, monkeypatch, capsys, encode, what):
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


LONG = "x" * 200_000


def test_a_few_aliases_of_a_long_string_are_refused_by_their_expanded_size(tmp_path):
    text = f'long: &s "{LONG}"\nmany: [{", ".join(["*s"] * 60)}]\n'  # 61 values, 12,000,000 characters expanded
    message = (f"its anchors and aliases expand to more than {MAX_YAML_CHARS:,} characters (an alias bomb?): "
               "refused; write the values out, or reuse fewer")
    with pytest.raises(ValueError) as refused:
        load_yaml(text, "strings.yaml")
    assert str(refused.value) == f"strings.yaml: {message}"
    custom = tmp_path / "custom.yaml"
    custom.write_text(text + "metrics:\n  - name: *s\n", encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        load_custom_metrics(custom)
    assert str(refused.value) == f"{custom}: {message}"
    assert load_yaml(f'long: &s "{LONG}"\nmany: [{", ".join(["*s"] * 48)}]\n', "ok.yaml")["many"][47] == LONG


def bounded(message: str, start: str) -> None:
    """``message`` begins with ``start`` and quotes at most :data:`MAX_QUOTE` characters of the long value (the
    rest of the message, such as the known names, under 400)."""
    assert message.startswith(start) and len(message) < len(start) + MAX_QUOTE + 400, message[:500]


def test_gate_traffic_and_settings_errors_quote_a_long_value_short(tmp_path):
    from rag_eval.metrics.sources.traffic import TrafficConfig
    from rag_eval.metrics.stats.gate import GateConfig

    path = tmp_path / "settings.toml"
    for text, start in [(f'metrics = ["{LONG}"]\n', "gate config: unknown metric(s) ['xxx"),
                        (f'baseline = ["{LONG}"]\n', "gate config: baseline is 'previous', 'tag:NAME' or a version "
                                                     "key, got ['xxx"),
                        (f'repeats = "{LONG}"\n', "gate config: repeats must be a whole number, 1 or more, got 'xxx"),
                        (f'"{LONG}" = 1\n', f"{path}: unknown gate setting(s) ['xxx")]:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError) as refused:
            GateConfig.load(path)
        bounded(str(refused.value), start)
    for text, start in [(f'format = "{LONG}"\n', "traffic config: format is one of "),
                        (f'metrics = ["{LONG}"]\n', "traffic config: unknown metric 'xxx"),
                        (f'strata = ["{LONG}"]\n', "traffic config: strata are among ")]:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError) as refused:
            TrafficConfig.load(path)
        bounded(str(refused.value), start)


def test_a_trace_mapping_naming_a_long_unknown_field_is_quoted_short(tmp_path):
    from rag_eval.metrics.sources.traces.model import TraceProblem
    from rag_eval.metrics.sources.traces.tables import read_table_files

    table = tmp_path / "traces.jsonl"
    table.write_text('{"trace_id": "t1", "start": "2026-01-01T00:00:00Z"}\n', encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        list(read_table_files([table], {LONG: "question"}))
    bounded(str(refused.value), "trace column mapping names unknown field(s) ['xxx")
    [problem] = [p for p in read_table_files([table], {"user_input": LONG})
                 if isinstance(p, TraceProblem) and p.reason.startswith("the mapping")]
    bounded(problem.reason, "the mapping reads user_input from the column 'xxx")


def test_sweep_with_an_unknown_retriever_quotes_its_name_short(tmp_path, monkeypatch, capsys):
    from rag_eval.orchestration import cli

    path = tmp_path / "targets.toml"
    path.write_text(f'questions = "q.jsonl"\n[retriever.r]\ncallable = "m:f"\n[generator.g]\ncallable = "m:g"\n'
                    f'[sweep]\nretriever = ["{LONG}"]\n', encoding="utf-8")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    bounded(err, f"error: {path}: no retriever ['xxx")
    assert err.endswith(" declared (declare [retriever.NAME], or a [system.NAME] callable returning contexts and "
                        "response)\n") and err.count("\n") == 1


def test_no_output_is_written_through_a_symlink_planted_deeper_in_the_output_folder(tmp_path):
    from rag_eval.assets.outputs import output_folder
    from rag_eval.assets.resources import ReportStore
    from rag_eval.assets.traffic_store import TrafficStore

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / "v1").mkdir(parents=True)
    elsewhere.mkdir()
    (elsewhere / "kept.json").write_text("theirs", encoding="utf-8")
    store = ReportStore(root=str(out))
    (out / "v1" / "summary.json").symlink_to(elsewhere / "kept.json")  # a file of a report folder
    with pytest.raises(StorageError) as refused:
        store.folder("v1")
    assert str(refused.value) == (f"{out / 'v1' / 'summary.json'}: a symbolic link out of the output folder {out} "
                                  f"(to {elsewhere / 'kept.json'}); rag-eval writes inside the output folder only: "
                                  "remove the link, then run again")
    (out / "data_docs" / "validations").mkdir(parents=True)
    (out / "data_docs" / "validations" / "page.html").symlink_to(elsewhere / "page.html")  # deep in GE's site
    with pytest.raises(StorageError, match=r"page\.html: a symbolic link out of the output folder"):
        store.data_docs_site()
    (out / "tables").symlink_to(elsewhere)  # the results store's folder
    with pytest.raises(StorageError, match=r"faithfulness: a symbolic link out of the output folder"):
        output_folder(out, out / "tables" / "faithfulness")
    (out / "traffic").mkdir()
    (out / "traffic" / "2026-11-01").symlink_to(elsewhere)
    with pytest.raises(StorageError, match=r"2026-11-01: a symbolic link out of the output folder"):
        TrafficStore(root=str(out / "traffic")).folder("2026-11-01")
    (out / "rag_eval.duckdb").symlink_to(elsewhere / "new.duckdb")  # the results database's views
    from rag_eval.assets.results_store import refresh_views

    with pytest.raises(StorageError, match=r"rag_eval\.duckdb: a symbolic link out of the output folder"):
        refresh_views(out, print)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["kept.json"]  # nothing made or written there
    assert (elsewhere / "kept.json").read_text(encoding="utf-8") == "theirs"
    (out / "v2").mkdir()
    (out / "v2" / "same.json").symlink_to(out / "v1")  # a link that stays inside is an entry of the folder
    assert store.folder("v2") == out / "v2"


def test_a_run_refuses_a_results_folder_linked_out_of_the_output_folder_in_one_line(tmp_path, monkeypatch, capsys):
    from rag_eval.orchestration import cli
    from tests.conftest import FIQA

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "tables").symlink_to(elsewhere)
    for name in [k for k in os.environ if k.startswith(("OPENAI_", "EMBEDDING_", "RAG_EVAL_"))]:
        monkeypatch.delenv(name)  # the offline judge
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", str(FIQA), "--metrics", "faithfulness", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert list(elsewhere.iterdir()) == []
    [failed] = [line for line in err.splitlines() if "failed: " in line]
    assert failed.startswith(f"step ingest_dataset failed: {out / 'tables' / 'questions'}: a symbolic link out of the "
                             f"output folder {out} (to {elsewhere / 'questions'}); rag-eval writes inside the output "
                             "folder only: remove the link, then run again"), err[-3000:]


def test_configuration_nested_too_deeply_is_one_line_naming_the_file(tmp_path, capsys):
    """YAML and TOML nested past Python's recursion limit (PyYAML and tomllib recurse): the file
    named in one line, no RecursionError traceback (custom metrics, gate settings, a sweep)."""
    from rag_eval.orchestration import cli

    deep = tmp_path / "deep.yaml"
    deep.write_text("metrics: " + "[" * 50_000 + "]" * 50_000, encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        load_yaml(deep.read_text(encoding="utf-8"), str(deep))
    assert str(refused.value) == f"{deep}: its values are nested too deeply to read"
    settings = tmp_path / "gate.toml"
    settings.write_text("metrics = " + "[" * 50_000 + "]" * 50_000, encoding="utf-8")
    assert cli.main(["gate", "--config", str(settings), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"error: {settings}: its values are nested too deeply to read\n"


def test_a_toml_integer_too_long_for_python_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys):
    """tomllib's int() of 5,000 digits raised ValueError "Exceeds the limit (4300 digits)", a traceback (exit 70):
    a --config, and ./pyproject.toml read by default."""
    from rag_eval.orchestration import cli

    limit = sys.get_int_max_str_digits()
    assert limit == 4300
    settings = tmp_path / "gate.toml"
    settings.write_text("repeats = " + "1" * 5000 + "\n", encoding="utf-8")
    problem = "a value cannot be read: Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits"
    assert cli.main(["gate", "--config", str(settings), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"error: {settings}: {problem}\n"
    (tmp_path / "pyproject.toml").write_text("[tool.rag_eval.gate]\nrepeats = " + "1" * 5000 + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["gate", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"error: pyproject.toml: {problem}\n"


def test_a_toml_settings_file_over_the_size_limit_is_refused_before_it_is_parsed(tmp_path, capsys):
    """A 200 MB --config was parsed for 26 s at 620 MB: one byte over the YAML loader's limit is refused at once."""
    from rag_eval.orchestration import cli

    settings = tmp_path / "gate.toml"
    settings.write_text("# " + "x" * (MAX_YAML_TEXT - 15) + "\nrepeats = 3\n", encoding="utf-8")  # the limit exactly: read
    assert settings.stat().st_size == MAX_YAML_TEXT and tool_section(settings, "gate", {"repeats"}) == {"repeats": 3}
    settings.write_text("# " + "x" * (MAX_YAML_TEXT - 2) + "\n", encoding="utf-8")  # one byte more
    assert cli.main(["gate", "--config", str(settings), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (f"error: {settings}: {MAX_YAML_TEXT + 1:,} bytes, more than a configuration "
                                       f"file may hold ({MAX_YAML_TEXT:,}): refused; keep long data (questions, "
                                       "documents) in their own files\n")


@pytest.mark.parametrize("kind", ["device", "pipe", "folder"])
def test_a_configuration_file_that_is_no_regular_file_is_refused_unread(tmp_path, capsys, kind):
    """--config or --custom-metrics linked to /dev/zero was read until memory ran out (MemoryError); a pipe
    no one writes to would wait for ever; a folder was a traceback."""
    from rag_eval.orchestration import cli

    where = tmp_path / "where"
    if kind == "device":
        where.symlink_to("/dev/zero")
    elif kind == "pipe":
        os.mkfifo(where)
    else:
        where.mkdir()
    refused = f"{where}: not a regular file (a folder, a device or a pipe): refused; give a regular file"
    assert cli.main(["gate", "--config", str(where), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"error: {refused}\n"
    with pytest.raises(ValueError) as custom:
        load_custom_metrics(where)
    with pytest.raises(ValueError) as targets:
        load_config(where)
    assert str(custom.value) == str(targets.value) == refused
