"""The RAG system under evaluation as assets: retriever → retrieval → generator → generation.

A *target run* is a partition of ``dataset_version`` whose folder holds ``target.json``
(one configuration of ``rag_eval.metrics.sources.targets.config``) and ``questions.jsonl`` (the question
set) instead of a samples file brought by the user. Its assets (group ``target``):

* ``question_set``: the questions (data version: their content hash);
* ``retriever`` and ``generator``: the configuration's parts (data version: the part's
  version hash, from its declared version and parameters; a system callable is both);
* ``system_contexts``: ``retrieved_contexts`` and ``retrieved_documents`` per question, from the
  retriever (or the system);
* ``system_responses``: the ``response`` per question from the generator given the question and
  its contexts; it writes the partition's ``samples.jsonl``, which ``ingest_dataset``
  (depending on these assets) splits into the field assets the metric assets read.

Each output's data version is the hash of its content, so Dagster's staleness follows
exactly what changed: a new generator makes ``system_responses`` stale, then (if the responses
changed) the ``responses`` field and the metrics reading it, never ``system_contexts`` or the
context-only metrics; a new ``top_k`` makes ``system_contexts`` stale and everything below it.
A row the system failed on has status ``target_error`` and its cause, in these assets and,
through ``samples.jsonl``'s ``target_error`` key, in every metric's results.
"""

import hashlib
import json
import os
from pathlib import Path

import dagster as dg
import pandas as pd

from rag_eval.assets.ingestion import as_text, content_version
from rag_eval.assets.partitions import dataset_versions
from rag_eval.assets.registration import RegistrationError, _add_partition
from rag_eval.assets.resources import DatasetStore, JudgeResource
from rag_eval.metrics.core.samples import ALIASES, load_samples
from rag_eval.metrics.sources.targets.call import Outcome, call_part
from rag_eval.metrics.sources.targets.config import Configuration, SweepConfig
from rag_eval.metrics.sources.targets.config_file import TargetConfigError
from rag_eval.metrics.errors import command

GROUP = "target"
CALLING_VERSION = "1"
COST_COLUMNS = ["calls", "cached", "latency_s", "prompt_tokens", "completion_tokens"]


def configuration_of(store: DatasetStore, version: str) -> Configuration:
    """The configuration of target run ``version`` (its ``target.json``).

    Raises
    ------
    dagster.Failure
        If ``version`` is not a target run (a file-based version has no ``target.json``).
    """
    path = Path(store.root) / version / "target.json"
    if not path.is_file():
        raise dg.Failure(f"dataset version {version} is not a target run (no {path}): the target assets run on "
                         f"partitions made by `{command('sweep CONFIG')}`", allow_retries=False)
    return Configuration.from_dict(json.loads(path.read_text(encoding="utf-8")))


def register_target_run(instance: dg.DagsterInstance, store: DatasetStore, sweep: SweepConfig,
                        configuration: Configuration) -> str:
    """Register (or update) the partition of ``configuration`` on the sweep's question set:
    ``<question set name>-<8 hex of its content>.<configuration name>``, so the same question
    set and configuration name keep their partition and re-runs are incremental.

    Raises
    ------
    RegistrationError
        If the question set is missing or empty, or the key is too long.
    """
    from rag_eval.assets.registration import dataset_file

    try:
        source = dataset_file(sweep.questions)
    except RegistrationError as exc:
        raise RegistrationError(f"question set of {sweep.path}: {exc}") from None
    content = source.read_bytes()
    key = f"{source.stem}-{hashlib.sha256(content).hexdigest()[:8]}.{configuration.name}"
    if len(key) > 128:
        raise RegistrationError(f"target run key {key!r} is longer than 128 characters: shorten the part names")
    _add_partition(instance, key)  # before the folder: the sensor never adopts a folder of a known key
    folder = Path(store.root) / key
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "questions.jsonl").is_file() or (folder / "questions.jsonl").read_bytes() != content:
        (folder / "questions.jsonl").write_bytes(content)
    text = json.dumps(configuration.to_dict(), indent=2, ensure_ascii=False, sort_keys=True)
    if not (folder / "target.json").is_file() or (folder / "target.json").read_text(encoding="utf-8") != text:
        (folder / "target.json").write_text(text, encoding="utf-8")
    meta = {role: part.describe() for role, part in configuration.parts.items()}
    if "system" in meta:
        meta["retriever"] = meta["generator"] = meta.pop("system")
    (folder / "meta.json").write_text(json.dumps({**meta, "target": configuration.name}, ensure_ascii=False),
                                      encoding="utf-8")
    return key


def _part_asset(role: str) -> dg.AssetsDefinition:
    @dg.asset(name=role, partitions_def=dataset_versions, group_name=GROUP, code_version=CALLING_VERSION,
              kinds={"pandas"},
              description=f"The {role} of the target run: kind, what it calls, declared version, parameters; "
                          "its data version is the part's version hash.")
    def _part(context: dg.AssetExecutionContext, dataset_store: DatasetStore) -> dg.Output[pd.DataFrame]:
        configuration = configuration_of(dataset_store, context.partition_key)
        part = configuration.parts.get("system") or configuration.parts[role]
        frame = pd.DataFrame([{"version": context.partition_key, "role": part.role, "name": part.name,
                               "kind": part.kind, "declared_version": part.version,
                               "parameters": json.dumps(part.parameters, sort_keys=True, default=str),
                               "version_hash": part.version_hash}])
        return dg.Output(frame, data_version=dg.DataVersion(part.version_hash),
                         metadata={"part": part.describe(), "version_hash": part.version_hash, "kind": part.kind})

    return _part


retriever, generator = _part_asset("retriever"), _part_asset("generator")


@dg.asset(partitions_def=dataset_versions, group_name=GROUP, code_version=CALLING_VERSION, kinds={"pandas"},
          description="The question set of the target run: id, row, user_input, reference, retrieval_ground_truth, "
                      "problem (why user_input is unusable).")
def question_set(context: dg.AssetExecutionContext, dataset_store: DatasetStore) -> dg.Output[pd.DataFrame]:
    """One row per line of ``questions.jsonl`` (unreadable lines too, with their problem)."""
    configuration_of(dataset_store, context.partition_key)
    path = Path(dataset_store.root) / context.partition_key / "questions.jsonl"
    samples = load_samples(path)
    frame = pd.DataFrame({"version": context.partition_key, "id": [s.id for s in samples],
                          "row": [s.row for s in samples],
                          "user_input": pd.Series([s.user_input for s in samples], dtype="string"),
                          "reference": pd.Series([s.reference for s in samples], dtype="string"),
                          "retrieval_ground_truth": pd.Series([as_text(s.retrieval_ground_truth) for s in samples],
                                                              dtype="string"),
                          "problem": pd.Series([s.missing("user_input") for s in samples], dtype="string")})
    return dg.Output(frame, data_version=content_version(frame, ["user_input", "reference", "retrieval_ground_truth",
                                                                 "problem"]),
                     metadata={"num_rows": len(frame), "usable": int(frame["problem"].isna().sum()),
                               "source_sha256": hashlib.sha256(path.read_bytes()).hexdigest()})


def _outcome_frame(version: str, frame: pd.DataFrame, outcomes: dict[int, Outcome], columns: dict[str, str],
                   skipped: dict[int, str]) -> pd.DataFrame:
    """One row per question: status (ok, target_error, input_error), error, ``columns`` of the
    answer (``{column: key in the answer}``, lists as JSON), and the call's cost."""
    records = []
    for row, sample_id in zip(frame["row"], frame["id"]):
        outcome = outcomes.get(row)
        value = outcome.value if outcome and outcome.value else {}
        status = "ok" if value else ("input_error" if row in skipped and skipped[row].startswith("input")
                                     else "target_error")
        records.append({"version": version, "id": sample_id, "row": int(row), "status": status,
                        "error": None if value else (outcome.error if outcome else skipped[row]),
                        **{c: as_text(value.get(k)) for c, k in columns.items()},
                        "calls": outcome.calls if outcome else 0, "cached": bool(outcome and outcome.cached),
                        "latency_s": round(outcome.latency, 4) if outcome else 0.0,
                        "prompt_tokens": outcome.prompt_tokens if outcome else 0,
                        "completion_tokens": outcome.completion_tokens if outcome else 0})
    out = pd.DataFrame(records, columns=["version", "id", "row", "status", "error", *columns, *COST_COLUMNS])
    for column in ["status", "error", *columns]:
        out[column] = out[column].astype("string")
    return out


def _cost_metadata(frame: pd.DataFrame) -> dict:
    return {"target_calls": int(frame["calls"].sum()), "cache_hits": int(frame["cached"].sum()),
            "answered": int((frame["status"] == "ok").sum()),
            "target_errors": int((frame["status"] == "target_error").sum()),
            "prompt_tokens": int(frame["prompt_tokens"].sum()),
            "completion_tokens": int(frame["completion_tokens"].sum()),
            "mean_latency_s": float(frame.loc[frame["status"] == "ok", "latency_s"].mean() or 0.0)
            if (frame["status"] == "ok").any() else 0.0}


def _call(context: dg.AssetExecutionContext, configuration: Configuration, role: str, inputs: dict[int, dict],
          judge: JudgeResource):
    part = configuration.parts.get("system") or configuration.parts[role]
    rows = list(inputs)
    try:
        outcomes = call_part(part, [inputs[r] for r in rows], configuration.call,
                             judge.call_cache(configuration.call.cache_path))
    except TargetConfigError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc
    result = dict(zip(rows, outcomes))
    calls = sum(o.calls for o in outcomes)
    failed = sum(1 for o in outcomes if o.error)
    context.log.info(f"{part.role} {part.describe()}: {len(rows)} rows, {calls} calls, "
                     f"{sum(o.cached for o in outcomes)} from the cache, {failed} target_error")
    return result


@dg.asset(partitions_def=dataset_versions, group_name=GROUP, code_version=CALLING_VERSION, kinds={"pandas"},
          deps=[retriever],
          description="retrieved_contexts and retrieved_documents (ids and scores when the retriever gives them) "
                      "per question, with status (ok, target_error with its cause) and the call's cost.")
def system_contexts(context: dg.AssetExecutionContext, dataset_store: DatasetStore, judge: JudgeResource,
              question_set: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Call the retriever (or the system) once per usable question, through the call cache (the
    ``judge`` resource's: ``JudgeResource.call_cache``)."""
    configuration = configuration_of(dataset_store, context.partition_key)
    usable = question_set[question_set["problem"].isna()]
    outcomes = _call(context, configuration, "retriever", {int(r): {"user_input": q} for r, q in
                                                            zip(usable["row"], usable["user_input"])}, judge)
    skipped = {int(r): f"input_error: user_input {p}" for r, p in zip(question_set["row"], question_set["problem"])
               if not pd.isna(p)}
    columns = {"retrieved_contexts": "retrieved_contexts", "retrieved_documents": "retrieved_documents"}
    if "system" in configuration.parts:
        columns["response"] = "response"
    frame = _outcome_frame(context.partition_key, question_set, outcomes, columns, skipped)
    return dg.Output(frame, data_version=content_version(frame, ["status", "error", *columns]),
                     metadata=_cost_metadata(frame))


@dg.asset(partitions_def=dataset_versions, group_name=GROUP, code_version=CALLING_VERSION, kinds={"pandas"},
          deps=[generator],
          description="The response per question from the generator given the question and its retrieved "
                      "contexts, with status and cost; writes the run's samples.jsonl for ingest_dataset.")
def system_responses(context: dg.AssetExecutionContext, dataset_store: DatasetStore, judge: JudgeResource,
               question_set: pd.DataFrame, system_contexts: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Call the generator once per question whose retrieval succeeded, through the ``judge``'s call cache
    (a system's responses come with its retrieval); write ``samples.jsonl``: each line of the question set with
    ``retrieved_contexts``, ``retrieved_documents``, ``response`` and, where the system
    failed, ``target_error`` ``{field: cause}``."""
    configuration = configuration_of(dataset_store, context.partition_key)
    retrieval = system_contexts
    done = retrieval[retrieval["status"] == "ok"]
    skipped = {int(r): (e if s == "input_error" else f"not generated: retrieval failed ({e})")
               for r, s, e in zip(retrieval["row"], retrieval["status"], retrieval["error"]) if s != "ok"}
    if "system" in configuration.parts:
        outcomes = {int(r): Outcome(value={"response": t}) for r, t in zip(done["row"], done["response"])}
    else:
        outcomes = _call(context, configuration, "generator",
                         {int(r): {"user_input": q, "retrieved_contexts": json.loads(c)} for r, q, c in
                          zip(done["row"], question_set.set_index("row").loc[done["row"], "user_input"],
                              done["retrieved_contexts"])}, judge)
    frame = _outcome_frame(context.partition_key, question_set, outcomes, {"response": "response"}, skipped)
    _write_samples(Path(dataset_store.root) / context.partition_key, retrieval, frame)
    return dg.Output(frame, data_version=content_version(frame, ["status", "error", "response"]),
                     metadata=_cost_metadata(frame))


_WRITTEN = ("retrieved_contexts", "retrieved_documents", "response")


def _write_samples(folder: Path, retrieval: pd.DataFrame, generation: pd.DataFrame) -> None:
    """``samples.jsonl``: line for line the question set (blank and unreadable lines as they
    are, so line numbers agree), each question with the system's outputs; staged and renamed."""
    found = retrieval.set_index("row")
    answered = generation.set_index("row")
    lines = []
    for row, line in enumerate((folder / "questions.jsonl").read_bytes().decode("utf-8", "replace").splitlines()):
        try:
            record = json.loads(line) if line.strip() else None
        except json.JSONDecodeError:
            record = None
        if not isinstance(record, dict) or row not in found.index or found.at[row, "status"] == "input_error":
            lines.append(line)
            continue
        for name in _WRITTEN:
            for alias in (name, *ALIASES[name]):
                record.pop(alias, None)
        errors = {}
        if found.at[row, "status"] == "ok":
            record["retrieved_contexts"] = json.loads(found.at[row, "retrieved_contexts"])
            documents = found.at[row, "retrieved_documents"]
            if not pd.isna(documents) and json.loads(documents) is not None:
                record["retrieved_documents"] = json.loads(documents)
        else:
            errors["retrieved_contexts"] = errors["retrieved_documents"] = found.at[row, "error"]
        if answered.at[row, "status"] == "ok":
            record["response"] = answered.at[row, "response"]
        else:
            errors["response"] = answered.at[row, "error"]
        if errors:
            record["target_error"] = errors
        lines.append(json.dumps(record, ensure_ascii=False))
    staged = folder / f".samples-{os.getpid()}.jsonl"
    staged.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(staged, folder / "samples.jsonl")


target_assets = [question_set, retriever, generator, system_contexts, system_responses]
