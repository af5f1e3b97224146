"""Rows per second of the offline judge, local versus Spark ``local[2]``, on 1,000 rows.

The rows are FiQA's 30 and amnesty_qa's 20 examples repeated with a row number added to
the question and the response (so no two rows are equal), scored with the five core
metrics. Prints rows, seconds and rows/s for each path and whether the results are equal.

    .venv/bin/python bench/spark_bench.py [--rows 1000] [--master local[2]]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from rag_eval.metrics import OfflineJudge, evaluate  # noqa: E402


def rows(count: int) -> list[dict]:
    base = [json.loads(line) for name in ("fiqa", "amnesty_qa")
            for line in (REPO / "examples" / name / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    out = []
    for i in range(count):
        row = dict(base[i % len(base)])
        row.pop("id", None)
        row["user_input"] = f"{row['user_input']} (case {i})"
        row["response"] = f"Case {i}. {row['response']}"
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    data = rows(args.rows)

    start = time.perf_counter()
    local = evaluate(data, judge=OfflineJudge())
    local_s = time.perf_counter() - start

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master(args.master).config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.sparkContext.parallelize([0, 1], 2).count()  # start the executors outside the timing
    start = time.perf_counter()
    distributed = evaluate(spark.sparkContext.parallelize(data, 2), judge=OfflineJudge())
    spark_s = time.perf_counter() - start
    spark.stop()

    columns = ["sample_id", "row", "metric", "status", "value"]
    print(json.dumps({"rows": len(data), "local_s": round(local_s, 1), "local_rows_per_s": round(len(data) / local_s, 1),
                      "spark_master": args.master, "spark_s": round(spark_s, 1),
                      "spark_rows_per_s": round(len(data) / spark_s, 1),
                      "results_equal": bool(local.results[columns].equals(distributed.results[columns])),
                      "summaries_equal": local.summary == distributed.summary}))


if __name__ == "__main__":
    main()
