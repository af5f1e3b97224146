"""``rag-eval testset DOCS -n N``: a test set from a folder of documents (``rag_eval.metrics.sources.testset``).

With an LLM endpoint (the judge's settings: ``OPENAI_BASE_URL``/``OPENAI_API_KEY``,
``--base-url``, ``--model``...) it generates questions with reference answers and sources;
without one (or with ``--inverse-cloze``) it writes the inverse-cloze retrieval set.
``--dry-run`` prints the requests and tokens it would send and writes nothing.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``testset`` subcommand's arguments."""
    from rag_eval.metrics.sources.testset.documents import CHUNK_TOKENS
    from rag_eval.orchestration.parsing import add_judge_arguments

    parser.add_argument("docs", help="folder of documents (.txt, .md, .html, .pdf; read recursively)")
    parser.add_argument("-n", "--questions", type=int, default=20, metavar="N", help="questions wanted (default 20)")
    parser.add_argument("--out", help="folder to write the test set in (default testsets/<name of DOCS>)")
    parser.add_argument("--chunk-tokens", type=int, default=CHUNK_TOKENS,
                        help=f"chunk size in estimated tokens (default {CHUNK_TOKENS})")
    parser.add_argument("--chunk-seed", type=int, default=0, help="seeds the choice of chunks and sentences (default 0)")
    parser.add_argument("--inverse-cloze", action="store_true",
                        help="write the offline inverse-cloze retrieval set even when an LLM endpoint is configured")
    judge = add_judge_arguments(parser)
    judge.add_argument("--dry-run", action="store_true",
                       help="print the requests and tokens generation would send; send and write nothing")
    parser.set_defaults(handler=cmd_testset, uses_instance=False, judges=True)


def _usage_line(kind: str, usage, per: int) -> str:
    tokens = usage.prompt_tokens + usage.completion_tokens
    return (f"{kind:<22}{usage.chat_requests:>9,}{tokens:>12,}"
            f"{usage.chat_requests / per if per else 0:>14.2f}{tokens / per if per else 0:>14,.0f}")


def cmd_testset(args: argparse.Namespace) -> int:
    """Read, chunk, generate (or inverse-cloze) and write; print counts, requests and tokens."""
    from rag_eval.metrics.errors import InputError, SettingsError
    from rag_eval.metrics.judges.config import LLMConfig
    from rag_eval.metrics.judges.llm import LLMJudge
    from rag_eval.metrics.sources.testset import chunk_documents, inverse_cloze, read_documents, write_testset
    from rag_eval.metrics.sources.testset.inverse_cloze import why_none
    from rag_eval.orchestration.settings import judge_resource

    if args.questions < 1:
        raise SettingsError(f"-n {args.questions}: ask for 1 question or more")
    resource = judge_resource(args)  # the judge options, checked
    config = LLMConfig.from_env(**{name: getattr(resource, name) for name in LLMConfig.public_fields()})
    if args.dry_run and config.cache_path and not Path(config.cache_path).exists():
        config = replace(config, cache_path=None)  # a dry run creates no cache: with none, nothing is cached
    documents, skipped = read_documents(args.docs)
    for name, reason in skipped.items():
        print(f"skipped {name}: {reason}", file=sys.stderr)
    chunks = chunk_documents(documents, args.chunk_tokens)
    if not chunks:
        raise InputError(f"{args.docs}: no document with text (.txt, .md, .html, .pdf)")
    out = Path(args.out or Path("testsets") / Path(args.docs).resolve().name)
    print(f"{len(documents)} documents, {len(chunks)} chunks of at most {args.chunk_tokens} tokens", file=sys.stderr)
    report = {"documents": args.docs, "chunks": len(chunks), "chunk_tokens": args.chunk_tokens,
              "chunk_seed": args.chunk_seed, "asked": args.questions, "skipped_files": skipped}
    if args.inverse_cloze or not config.configured:
        if args.dry_run:
            print(f"dry run: the inverse-cloze set of up to {args.questions} questions sends no request (0 tokens); "
                  "nothing is written")
            return 0
        questions, corpus = inverse_cloze(chunks, args.questions, args.chunk_seed)
        notes = [] if questions else [f"no question: {why_none(chunks)}"]
        written = write_testset(out, questions, corpus, {**report, "method": "inverse_cloze", "kept": len(questions),
                                                         "notes": notes})
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        print(f"inverse-cloze retrieval set (offline, no request): {len(questions)} questions of {args.questions} "
              f"asked, one sentence of each of {len(questions)} chunks")
        return _done(out, written, len(questions))
    judge = LLMJudge(config, sink=args.spill)
    try:
        return _generated(args, judge, chunks, report, out)
    finally:
        judge.close()


def _generated(args: argparse.Namespace, judge, chunks: list, report: dict, out: Path) -> int:
    """The LLM set (or, with ``--dry-run``, what it would send)."""
    from rag_eval.metrics.judgements.question_critic import question_critic
    from rag_eval.metrics.judgements.question_generation import question_generation
    from rag_eval.metrics.sources.testset import write_testset
    from rag_eval.metrics.sources.testset.generate import DISTRIBUTION, MAX_GENERATIONS, agenerate, aplan

    if args.dry_run:
        plans = judge.run(aplan(judge, chunks, args.questions, args.chunk_seed))
        where = judge.describe()["base_url"] or "the OpenAI API"
        print(f"dry run: {args.questions} questions from {len(chunks)} chunks, model {judge.config.model} at {where}; "
              "nothing is sent or written")
        print(f"{'request':<22}{'chat':>9}{'prompt tokens':>16}{'completion tokens':>19}")
        total = [0, 0, 0]
        for kind, plan in plans.items():
            prompt = sum(r.prompt_tokens for r in plan.requests)
            completion = sum(r.completion_tokens for r in plan.requests)
            total = [total[0] + len(plan.requests), total[1] + prompt, total[2] + completion]
            print(f"{kind:<22}{len(plan.requests):>9,}{prompt:>16,}{completion:>19,}")
        print(f"{'total':<22}{total[0]:>9,}{total[1]:>16,}{total[2]:>19,}")
        print(f"(after the judgement cache, if no question is dropped; each dropped question is replaced by another "
              f"generation and critic request, up to {MAX_GENERATIONS * args.questions} generations; tokens estimated "
              "at 4 bytes of UTF-8 a token)")
        return 0
    judge.check_endpoint()  # unreachable, key refused, unknown model: exit 2 before anything is spent
    result = judge.run(agenerate(judge, chunks, args.questions, args.chunk_seed))
    kept = len(result.questions)
    usage = {kind: u.as_dict() for kind, u in result.usage.items()}
    requests = sum(u.chat_requests for u in result.usage.values())
    tokens = sum(u.prompt_tokens + u.completion_tokens for u in result.usage.values())
    reasons: dict[str, int] = {}
    for row in result.dropped:
        reasons[row["dropped"]] = reasons.get(row["dropped"], 0) + 1
    corpus = [{"id": c.id, "document": c.document_id, "text": c.text} for c in chunks]
    written = write_testset(out, result.questions, corpus, {
        **report, "method": "llm", "model": judge.config.model, "distribution": DISTRIBUTION, "kept": kept,
        "prompt_versions": {j.kind: j.version for j in (question_generation, question_critic)},
        "kept_by_kind": {k: sum(q["synthesizer_name"] == k for q in result.questions) for k in DISTRIBUTION},
        "dropped": len(result.dropped), "dropped_by_cause": reasons, "usage": usage,
        "requests_per_kept_question": round(requests / kept, 3) if kept else None,
        "tokens_per_kept_question": round(tokens / kept, 1) if kept else None, "notes": result.notes},
        result.dropped)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    by_kind = ", ".join(f"{k} {sum(q['synthesizer_name'] == k for q in result.questions)}" for k in DISTRIBUTION)
    print(f"{kept} questions kept of {args.questions} asked ({by_kind}); {len(result.dropped)} dropped "
          f"({', '.join(f'{c} {n}' for c, n in reasons.items()) or 'none'}; reasons in dropped.jsonl)")
    print(f"{'request':<22}{'sent':>9}{'tokens':>12}{'per question':>14}{'tokens/q':>14}")
    for kind, u in result.usage.items():
        print(_usage_line(kind, u, kept))
    print(f"{'total':<22}{requests:>9,}{tokens:>12,}{requests / kept if kept else 0:>14.2f}"
          f"{tokens / kept if kept else 0:>14,.0f}")
    return _done(out, written, kept)


def _done(out: Path, written: list[Path], kept: int) -> int:
    """Say what was written and how to evaluate it; exit status 1 when no question was kept."""
    from rag_eval.metrics.errors import command

    print(f"wrote {', '.join(p.name for p in written)} in {out}/; evaluate the baseline retriever on it with "
          f"`{command('sweep ' + str(out / 'sweep.toml'))}` (or point your own target file's `questions` at "
          f"{out / 'questions.jsonl'})")
    return 0 if kept else 1
