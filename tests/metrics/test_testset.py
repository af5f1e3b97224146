"""Test sets offline: documents read and chunked, the inverse-cloze set, and a BM25 retriever's NDCG on it."""
import json
import math
from pathlib import Path

import pytest

from rag_eval.metrics import evaluate
from rag_eval.metrics.judgements.question_generation import Seed
from rag_eval.metrics.judgements.question_generation import request as question_generation_request
from rag_eval.metrics.judges.plan import estimate_tokens
from rag_eval.metrics.retrieval.document_retrieval import NDCG
from rag_eval.metrics.sources.testset import chunk_documents, inverse_cloze, read_documents, write_testset
from rag_eval.metrics.sources.testset.baseline import bm25
from rag_eval.metrics.sources.testset.documents import Document, chunk_document, read_text
from rag_eval.metrics.sources.testset.generate import counts, language_of, seeds
from rag_eval.metrics.sources.testset.inverse_cloze import why_none
from rag_eval.metrics.text import split_sentences

DOCS = Path(__file__).resolve().parents[2] / "examples" / "testset" / "docs"


def pdf_with_text(text: str) -> bytes:
    """A one-page PDF whose text layer is ``text`` (Helvetica), with a correct cross-reference table."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_each_format_is_read_and_unreadable_files_are_named_with_their_reason(tmp_path):
    (tmp_path / "page.html").write_text(
        "<html><head><title>T</title><style>p {color: red}</style></head><body><h2>Wear limits</h2>"
        "<p>Replace the chain at 0.5 percent &amp; check it monthly.</p><script>track()</script></body></html>")
    (tmp_path / "notes.md").write_text("# Pressure\n\nRun **25 mm** tyres at [6 bar](http://x).\n")
    (tmp_path / "manual.pdf").write_bytes(pdf_with_text("Bed in new disc pads with twenty stops."))
    (tmp_path / "blank.pdf").write_bytes(pdf_with_text(""))
    (tmp_path / "latin1.txt").write_bytes("Caf\xe9 au lait.".encode("latin-1"))
    (tmp_path / "table.docx").write_bytes(b"PK\x03\x04")
    (tmp_path / ".hidden.md").write_text("never read")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main")
    documents, skipped = read_documents(tmp_path)
    assert [d.id for d in documents] == ["manual.pdf", "notes.md", "page.html"]
    assert skipped == {"blank.pdf": "no text (a scanned PDF needs OCR first)",
                       "latin1.txt": "not UTF-8 (byte 4); save it as UTF-8",
                       "table.docx": "not a supported document type (one of .htm, .html, .markdown, .md, .pdf, .txt)"}
    texts = {c.document_id: c.text for c in chunk_documents(documents)}
    assert texts == {"manual.pdf": "Bed in new disc pads with twenty stops.",
                     "notes.md": "Pressure. Run 25 mm tyres at 6 bar.",
                     "page.html": "Wear limits. Replace the chain at 0.5 percent & check it monthly."}
    with pytest.raises(FileNotFoundError, match="documents folder not found"):
        read_documents(tmp_path / "missing")
    assert "twenty stops" in read_text(tmp_path / "manual.pdf")


def test_escaped_html_text_stays_and_an_owner_password_pdf_is_read(tmp_path):
    import io

    from pypdf import PdfReader, PdfWriter

    (tmp_path / "page.html").write_text("<p>Write &lt;every&gt; torque &amp; its bolt down; &amp;lt;b&amp;gt; is "
                                        "markup.</p>")
    for name, user in (("owner.pdf", ""), ("locked.pdf", "secret")):
        writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_with_text("Torque the stem bolts to five newton "
                                                                         "metres."))))
        writer.encrypt(user_password=user, owner_password="owner", algorithm="RC4-128")
        with open(tmp_path / name, "wb") as file:
            writer.write(file)
    documents, skipped = read_documents(tmp_path)
    assert skipped == {"locked.pdf": "the PDF is encrypted (it needs a password to open)"}
    texts = {c.document_id: c.text for c in chunk_documents(documents)}
    assert texts == {"page.html": "Write <every> torque & its bolt down; &lt;b&gt; is markup.",
                     "owner.pdf": "Torque the stem bolts to five newton metres."}


def test_chunks_stay_within_their_size_and_keep_ids_stable():
    documents, _ = read_documents(DOCS)
    chunks = chunk_documents(documents, 128)
    assert len(documents) == 7 and len(chunks) == len({c.id for c in chunks})
    for chunk in chunks:
        assert chunk.id.startswith(f"{chunk.document_id}#")
        assert estimate_tokens(chunk.text) <= 128
    assert [c.id for c in chunks if c.document_id == "gears.txt"] == [f"gears.txt#{n}" for n in range(1, 6)]
    assert chunk_documents(documents, 128) == chunks
    # A heading ends as a sentence and opens the paragraph after it (plain text and HTML as Markdown).
    assert chunks[[c.id for c in chunks].index("gears.txt#1")].text.startswith(
        "Adjusting the rear derailleur. The rear derailleur moves")
    with pytest.raises(ValueError, match="at least 32 tokens"):
        chunk_document(Document("a.txt", "x"), 16)


def test_short_lines_closing_a_document_join_its_last_chunk():
    [chunk] = chunk_document(Document("rules.md", "Brakes need checking before every ride, and the pads should be "
                                      "replaced when worn down to the groove.\n\nAlways wear a helmet.\n\n"
                                      "Never ride at night without lights.\n"))
    assert chunk.text == ("Brakes need checking before every ride, and the pads should be replaced when worn down "
                          "to the groove.\nAlways wear a helmet. Never ride at night without lights.")
    # When they do not fit in the last chunk, they are a chunk of their own (never dropped, never over the size).
    long = "Pads wear faster in the rain than on dry roads, so check them after every wet ride. " * 4
    chunks = chunk_document(Document("wet.md", f"{long}\n\nAlways wear a helmet.\n"), 88)
    assert [c.text for c in chunks] == [long.strip(), "Always wear a helmet."]


def test_no_chunk_is_longer_than_the_chunk_size():
    # One line of 20,000 words without a sentence end; 3,000 tiny paragraphs; a run of Chinese without punctuation.
    words = " ".join(f"word{i}" for i in range(20000))
    items = "\n\n".join(f"item {i}" for i in range(3000))
    chinese = "链条磨损以后要及时更换" * 300
    for text, joined in ((words, lambda cs: " ".join(c.text for c in cs)),
                         (items, lambda cs: " ".join(c.text for c in cs)),
                         (chinese, lambda cs: "".join(c.text for c in cs))):
        chunks = chunk_document(Document("big.txt", text), 64)
        assert max(estimate_tokens(c.text) for c in chunks) <= 64 and len(chunks) > 10
        assert joined(chunks).replace("\n", " ") == (text if text is not items else ". ".join(
            f"item {i}" for i in range(3000)) + ".")  # nothing lost, in order (each tiny item ended as a sentence)
    # 20,000 words: 168,890 bytes + 19,999 spaces = 188,889 bytes; at most 256 bytes (64 tokens) a chunk and more
    # than 246 (a chunk ends only when the next word of at most 9 bytes and its space would not fit): 738 to 768.
    assert len(words.encode()) == 188889 and 738 <= len(chunk_document(Document("big.txt", words), 64)) <= 768


def test_a_copy_of_a_document_is_skipped_naming_the_first(tmp_path):
    text = ("Chains wear fastest of all the parts of the drivetrain. Measure the chain every month with a "
            "chain checker tool.")
    (tmp_path / "chain.md").write_text(f"# Chains\n\n{text}\n")
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "chain.txt").write_text(f"Chains.\n\n{text}  \n")  # the same text once normalised
    (tmp_path / "chain.html").write_text(f"<h1>Chains</h1><p>{text}</p>")
    documents, skipped = read_documents(tmp_path)
    assert [d.id for d in documents] == ["chain.html"]
    assert skipped == {"chain.md": "a copy of chain.html (the same text)",
                       "copy/chain.txt": "a copy of chain.html (the same text)"}
    # With the copies kept, every sentence would be in two chunks ("boilerplate"): no query at all.
    [question] = inverse_cloze(chunk_documents(documents), 3)[0]
    assert question["user_input"] in split_sentences(text)
    # Two chunks of the same text (a page repeated in two documents) are never a multi-hop pair.
    twins = [Document(f"{n}.txt", f"Intro {n} for the reader here. {text}") for n in "ab"]
    assert [len(chunk_documents([d])) for d in twins] == [1, 1]
    same = [c for d in twins for c in chunk_documents([Document(d.id, text)])]
    assert seeds(same)["multi_hop"] == [] and len(seeds(chunk_documents(twins))["multi_hop"]) == 1


def test_inverse_cloze_takes_one_sentence_out_of_each_chunk():
    chunks = chunk_documents(read_documents(DOCS)[0], 128)
    questions, corpus = inverse_cloze(chunks, 40, seed=0)
    texts = {c.id: c.text for c in chunks}
    masked = {row["id"]: row["text"] for row in corpus}
    assert len(questions) == len(chunks) == 32 and len(corpus) == 32  # every chunk here has 2+ sentences
    assert {q["retrieval_ground_truth"][0]["document_id"] for q in questions} == set(texts)  # one query per chunk
    for question in questions:
        [truth] = question["retrieval_ground_truth"]
        chunk = truth["document_id"]
        assert truth["query_relevance_label"] == 1 and question["synthesizer_name"] == "inverse_cloze"
        assert question["user_input"] in split_sentences(texts[chunk])  # a sentence of its chunk
        assert question["reference_contexts"] == [texts[chunk]]
        assert question["user_input"] not in masked[chunk] and masked[chunk]  # taken out of the corpus
    assert inverse_cloze(chunks, 40, seed=0) == (questions, corpus)
    assert [q["user_input"] for q in inverse_cloze(chunks, 40, seed=1)[0]] != [q["user_input"] for q in questions]
    # 5 asked: 5 chunks of 5 different documents (round-robin over the 7).
    few = inverse_cloze(chunks, 5)[0]
    assert len({q["retrieval_ground_truth"][0]["document_id"].split("#")[0] for q in few}) == 5
    # A sentence two chunks share (a footer) is never a query: the other chunk would still hold it.
    footer = "Questions about this manual go to the workshop desk at the front of the shop."
    shared = chunk_documents([Document(f"{name}.txt", f"{body} {footer}") for name, body in (
        ("a", "Chains wear fastest of all the parts of the drivetrain."),
        ("b", "Disc brakes keep almost all their power in the wet weather."))])
    assert sorted(q["user_input"] for q in inverse_cloze(shared, 5)[0]) == [
        "Chains wear fastest of all the parts of the drivetrain.",
        "Disc brakes keep almost all their power in the wet weather."]
    # A chunk of one sentence has nothing left to find once it is out: never a query.
    one = chunk_document(Document("one.txt", "Only one sentence with many words here."))
    assert inverse_cloze(one, 3)[0] == []
    # No query at all: why, for each of the three causes.
    assert why_none(one) == "every chunk is a single sentence (nothing would be left to find once it is out)"
    assert why_none(chunk_document(Document("short.txt", "Ride safe. Check the brakes. Pump the tyres."))) == \
        "no chunk of two sentences or more has a sentence of at least 5 content words"
    twice = [Document(f"{n}.txt", f"Note {n}. {footer}") for n in "12"]
    assert inverse_cloze(chunk_documents(twice), 3)[0] == [] and why_none(chunk_documents(twice)) == \
        "every sentence of at least 5 content words is shared by another chunk"


def test_bm25_ndcg_on_the_inverse_cloze_set_equals_the_ranks_by_hand(tmp_path):
    chunks = chunk_documents(read_documents(DOCS)[0], 128)
    questions, corpus = inverse_cloze(chunks, 40)
    write_testset(tmp_path, questions, corpus, {"method": "inverse_cloze", "kept": len(questions)})
    samples, by_hand = [], []
    for question in questions:
        hits = bm25(question["user_input"], top_k=10, corpus=str(tmp_path / "corpus.jsonl"))
        samples.append({**question, "retrieved_documents": [{"document_id": h["id"], "relevance_score": h["score"]}
                                                            for h in hits]})
        ids = [h["id"] for h in hits]
        relevant = question["retrieval_ground_truth"][0]["document_id"]
        # One relevant document of gain 2^1 - 1 = 1, ideal DCG 1: NDCG@10 = 1 / log2(rank + 1), 0 if not in the 10.
        by_hand.append(1 / math.log2(ids.index(relevant) + 2) if relevant in ids else 0.0)
    result = evaluate(samples, metrics=[NDCG(k=10)])
    values = result.results.sort_values("row")["value"].tolist()
    assert values == pytest.approx(by_hand, abs=1e-12)
    assert result.summary["metrics"]["ndcg"]["mean"] == round(sum(by_hand) / len(by_hand), 4)
    # The baseline finds most chunks without their sentence, and not all: the set tells retrievers apart.
    assert 0.3 < sum(by_hand) / len(by_hand) < 0.95
    sweep = (tmp_path / "sweep.toml").read_text(encoding="utf-8")
    assert f'corpus = {json.dumps(str((tmp_path / "corpus.jsonl").resolve()))}' in sweep


def test_bm25_indexes_chinese_as_character_bigrams(tmp_path):
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [
        {"id": "a", "text": "链条磨损以后要及时更换。"}, {"id": "b", "text": "雨天刹车要提前。"}]), encoding="utf-8")
    assert bm25("雨天怎么刹车", top_k=2, corpus=str(tmp_path / "c.jsonl"))[0]["id"] == "b"
    assert bm25("链条什么时候更换", top_k=2, corpus=str(tmp_path / "c.jsonl"))[0]["id"] == "a"


def test_seeds_of_each_kind_and_the_distribution():
    chunks = chunk_documents(read_documents(DOCS)[0], 128)
    pools = seeds(chunks)
    assert counts(4) == {"single_hop": 2, "multi_hop": 1, "abstract": 1}
    assert counts(10) == {"single_hop": 5, "multi_hop": 3, "abstract": 2}
    assert len(pools["single_hop"]) == 32
    # multi-hop pairs are two different chunks of one language; abstract ones neighbours of one document
    for a, b in pools["multi_hop"]:
        assert a != b and (language_of([a.text]) == "Chinese") == (language_of([b.text]) == "Chinese")
    for pair in pools["abstract"]:
        assert len({c.document_id for c in pair}) == 1
        numbers = [int(c.id.rsplit("#", 1)[1]) for c in pair]
        assert numbers[1] == numbers[0] + 1
    assert language_of(["链条是传动系统中磨损最快的零件。"]) == "Chinese"
    assert language_of(["The chain wears fastest."]) == "the language of the passages"


def test_chinese_headings_end_with_the_chinese_full_stop_and_one_name_makes_no_chinese_passage():
    body = "链条是传动系统中磨损最快的零件，应该定期测量，磨损超过百分之零点五时就要更换。"
    for name, text in (("a.md", f"# 链条保养\n\n{body}\n"), ("b.txt", f"链条保养\n\n{body}\n")):
        [chunk] = chunk_document(Document(name, text))
        assert chunk.text == f"链条保养。 {body}"
    # A Chinese name in an English passage (2 of 40 letters, under a fifth): English; Chinese with a brand name
    # (20 of 27 letters): Chinese.
    english = "The Great Wall (长城) is the longest wall in the world."
    assert language_of([english]) == "the language of the passages"
    assert language_of(["链条是传动系统中磨损最快的零件，Shimano链条也一样。"]) == "Chinese"
    assert language_of(["チェーンは消耗品です。"]) == "Japanese" and language_of(["체인은 소모품입니다."]) == "Korean"
    # ... so an English question about it is accepted, not refused for want of Chinese characters.
    seed = Seed(kind="single_hop", contexts=[english], language=language_of([english]))
    assert question_generation_request(seed).validate({"question": "How long is the Great Wall?", "answer": "Long."}) \
        == {"user_input": "How long is the Great Wall?", "reference": "Long."}
