"""Fetch the public datasets the benches read and the repository does not ship, from their sources.

    .venv/bin/python tools/fetch_data.py [--dest bench/data] [--only NAME ...] [--list]

Each dataset is downloaded over HTTPS from the public repository that publishes it, at a pinned
commit, into ``DEST/<name>/`` (default ``bench/data/``, where the benches look unless given
``--data``), and every file is checked against its SHA-256 (a mismatch is an error, nothing is
kept). A file already there with the right digest is not fetched again. ``--list`` prints what
would be fetched, from where, to where and under which licence, without any network access.

The licences are the publishers'; read them before you use a dataset for anything but your own
measurement. RGB (CC BY-NC-SA 4.0) is non-commercial, and trec_eval's test data research-only:
the script fetches them for you, to measure with; never commit them (``bench/data/`` is ignored by
git).
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Where the benches read by default (their ``--data``).
DEFAULT_DEST = REPO / "bench" / "data"
RAW = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def halueval_rows(source: bytes) -> dict[str, bytes]:
    """HaluEval's QA lines 1-100 and 301-500 with an ``id`` (``halueval-qa-NNN``, the 0-based line);
    lines 101-300 are left out (kept unseen for a held-out check)."""
    lines = source.decode("utf-8").splitlines()
    def part(first: int, last: int) -> bytes:
        return "".join(json.dumps({"id": f"halueval-qa-{i:03d}", **json.loads(lines[i])}, ensure_ascii=False) + "\n"
                       for i in range(first, last + 1)).encode("utf-8")
    return {"halueval_qa_rows_000_099.jsonl": part(0, 99), "halueval_qa_rows_300_499.jsonl": part(300, 499)}


def trec_eval_test_files(tarball: bytes) -> dict[str, bytes]:
    """trec_eval 9.0.8's own test qrels, run and printed outputs, from its source tarball."""
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        return {name: archive.extractfile(f"trec_eval.9.0.8/test/{name}").read()  # type: ignore[union-attr]
                for name in ("qrels.test", "results.test", "out.test", "out.test.aq")}


@dataclass(frozen=True)
class Dataset:
    """One dataset: ``files`` maps each path in ``repo`` at ``commit`` to its SHA-256; ``convert``
    (if any) turns the one downloaded file into the files written, whose digests are ``written``."""

    name: str
    repo: str
    commit: str
    licence: str
    used_by: str
    files: dict[str, str]
    convert: Callable[[bytes], dict[str, bytes]] | None = None
    written: dict[str, str] = field(default_factory=dict)

    def urls(self) -> dict[str, str]:
        return {path: RAW.format(repo=self.repo, commit=self.commit, path=path) for path in self.files}

    def outputs(self) -> dict[str, str]:
        """The file names written under ``DEST/<name>/`` and their SHA-256."""
        return self.written or {Path(path).name: digest for path, digest in self.files.items()}


DATASETS = [
    Dataset("halueval_qa", "RUCAIBox/HaluEval", "b7253db3cdaa0ab2c382f92b26b390109174f77e",
            "MIT (knowledge, questions and right answers from HotpotQA: CC BY-SA 4.0)",
            "offline_judge_accuracy, calibrate_judges, gate_bench, diagnostics_meta_eval",
            {"generation/qa/qa_one-turn_data.json": "a69227a32d03a0f034db10de62a92cdfd0e57c305f72a9f8c48e0edab74e44f6"},
            halueval_rows,
            {"halueval_qa_rows_000_099.jsonl": "74a7ad2ad54e5b98bd97fbdb17561764d84858140d6d7d6f71b6646f14e68944",
             "halueval_qa_rows_300_499.jsonl": "54c6aa994f1a7c3d444ae8a74e5de6a11c7ad14d46004b1e3a8ed1243ca23d84"}),
    Dataset("ragas_annotated", "explodinggradients/ragas", "3e28e9dec93897f47a98065be4c62f6d072a45a7",
            "Apache-2.0", "calibrate_judges (a copy also ships in tests/data/ragas_annotated)",
            {"docs/_static/annotated_data.json": "1603e984ca5a95063d699eda5764c3ed771fe69d9450688840c02bf183fdb7a9",
             "docs/_static/edited_chain_runs.json": "581d9e282f7063145f3bb56456936e9976254f08dc1800c56675a28a6d5b5770",
             "docs/_static/sample_annotated_summary.json":
                 "5ded9423389e006cb8b68eb69869895ca79e828c2ec94aaaf8056cead90163e3"}),
    Dataset("rgb", "chen700564/RGB", "d2293eec8c76467c1572b3ebedcaca4e9b4e82f4",
            "CC BY-NC-SA 4.0: non-commercial; measure with it, never commit it",
            "offline_judge_accuracy, calibrate_judges, llm_judge_bench, diagnostics_meta_eval",
            {"data/en_fact.json": "92f4b2330ee407f74fbd923197028ef5140cfbc1f4b4092efec2d4d10ae6c9e5",
             "data/zh_fact.json": "171c4bc97860635092ce099f2da095c6ba8d07f0c6f7a19d0231373192f07da0"}),
    Dataset("trec_eval_known_answers", "castorini/anserini-tools", "5b819c1a45c8a0a3ec9426f476694f44a29dfaf3",
            "research and non-commercial use (trec_eval's notice); test data, never commit it", "trec_eval_check",
            {"eval/trec_eval.9.0.8.tar.gz": "14efe81c321ddee8849397382ade2f6683a40d6962791a4d8f28bbdda3a99cf6"},
            trec_eval_test_files,
            {"qrels.test": "6c44a070a10bfb14b123cadc597227fc63c1acec109bc6d1e5a6bc4763906698",
             "results.test": "69019319f6cb9ce861b4ad08d90898170d3d2b27da580fb3cba59e557ff2fd20",
             "out.test": "eec0abb32bfb99fa78d239a3440b2c6cb01b06dead7e2338fd75b5c280d9eba0",
             "out.test.aq": "6e884d1ab060f5cede2e85490fb1f62e6ca664b8da99e7a8dfffeedefe9433eb"}),
    Dataset("trec_dl19_passage_qrels", "castorini/anserini-tools", "5b819c1a45c8a0a3ec9426f476694f44a29dfaf3",
            "none stated; NIST judgments over MS MARCO (non-commercial terms): research test data",
            "rag-eval convert-trec (graded 0-3 relevance for document_retrieval)",
            {"qrels/qrels.dl19-passage.txt": "8a1f10d550732e4cd91d7fc49846a3784de4040972f583e69285a88f3c5fee92",
             "topics/topics.dl19-passage.txt": "518992da259fb61f64e4790791df91a7b42ea5773f374aed59220ebb51d58d90"}),
]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def describe(dataset: Dataset, dest: Path) -> str:
    """What ``dataset`` fetches, from where, to where, under which licence (no network)."""
    lines = [f"{dataset.name}: {dataset.licence}; read by {dataset.used_by}"]
    lines += [f"  {url}" for url in dataset.urls().values()]
    lines += [f"  -> {dest / dataset.name / name}" for name in dataset.outputs()]
    return "\n".join(lines)


def present(dataset: Dataset, dest: Path) -> bool:
    """Every file of ``dataset`` is under ``dest`` with its digest."""
    folder = dest / dataset.name
    return all((folder / name).is_file() and sha256((folder / name).read_bytes()) == digest
               for name, digest in dataset.outputs().items())


def fetch(dataset: Dataset, dest: Path, get: Callable[[str], bytes]) -> list[Path]:
    """Download ``dataset`` with ``get(url) -> bytes``, check every digest and write its files
    under ``dest/<name>/``; returns the paths written.

    Raises
    ------
    ValueError
        When a downloaded or converted file's SHA-256 is not the pinned one (nothing is written).
    """
    downloaded = {}
    for path, url in dataset.urls().items():
        data = get(url)
        if sha256(data) != dataset.files[path]:
            raise ValueError(f"{url}: SHA-256 {sha256(data)}, expected {dataset.files[path]}: not written")
        downloaded[Path(path).name] = data
    files = dataset.convert(next(iter(downloaded.values()))) if dataset.convert else downloaded
    for name, digest in dataset.outputs().items():
        if sha256(files[name]) != digest:
            raise ValueError(f"{dataset.name}/{name}: SHA-256 {sha256(files[name])} after conversion, expected "
                             f"{digest}: not written")
    folder = dest / dataset.name
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return [folder / name for name in files]


def download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as reply:
        return reply.read()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="folder to write into (default bench/data)")
    parser.add_argument("--only", nargs="+", choices=[d.name for d in DATASETS], metavar="NAME",
                        help="fetch only these datasets: " + ", ".join(d.name for d in DATASETS))
    parser.add_argument("--list", action="store_true", help="print what would be fetched and where; fetch nothing")
    args = parser.parse_args(argv)
    chosen = [d for d in DATASETS if not args.only or d.name in args.only]
    if args.list:
        print("\n".join(describe(d, args.dest) for d in chosen))
        return 0
    failed = 0
    for dataset in chosen:
        if present(dataset, args.dest):
            print(f"{dataset.name}: already in {args.dest / dataset.name}")
            continue
        try:
            written = fetch(dataset, args.dest, download)
        except (OSError, ValueError, KeyError, tarfile.TarError) as exc:
            failed += 1
            print(f"{dataset.name}: error: {exc}", file=sys.stderr)
            continue
        print(f"{dataset.name}: wrote {', '.join(str(p) for p in written)} ({dataset.licence})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
