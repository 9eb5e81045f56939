"""`raso retrieval build-bench` and `raso retrieval eval` on a small corpus in the manifest layout."""

from __future__ import annotations

import argparse
import json

from raso.cli import retrieval as cmd
from tests.test_retrieval_dataset import _write_corpus


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raso")
    cmd.register(parser.add_subparsers(dest="command"))
    return parser


def test_build_then_eval_prints_a_table(tmp_path, capsys):
    corpus = _write_corpus(tmp_path / "corpus")
    bench = tmp_path / "bench.jsonl"
    args = _parser().parse_args(["retrieval", "build-bench", "--corpus", str(corpus), "--out", str(bench)])
    assert args.func(args) == 0
    assert "6 queries" in capsys.readouterr().out
    out_json = tmp_path / "res.json"
    args = _parser().parse_args(["retrieval", "eval", "--bench", str(bench), "--method", "bm25,tfidf-fields",
                                 "--split", "all", "--json", str(out_json), "--latency-sample", "3"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "| method | Hit@1 | R@5 | R@10 |" in out
    assert "| bm25 |" in out and "| tfidf-fields |" in out
    rows = json.loads(out_json.read_text())["rows"]
    # every reference text is the same apart from the "salesN" token, which no skill mentions,
    # so lexical methods cannot tell the six skills apart beyond chance: R@10 = 1 in a 6-skill pool
    assert rows["bm25"]["R@10"] == 1.0
    assert rows["bm25"]["ms/query"] > 0


def test_eval_rejects_unknown_methods_and_missing_files(tmp_path, capsys):
    args = _parser().parse_args(["retrieval", "eval", "--bench", str(tmp_path / "nope.jsonl"), "--method", "bm25"])
    assert args.func(args) == 2
    assert "cannot read the benchmark" in capsys.readouterr().err
    corpus = _write_corpus(tmp_path / "corpus")
    bench = tmp_path / "bench.jsonl"
    args = _parser().parse_args(["retrieval", "build-bench", "--corpus", str(corpus), "--out", str(bench)])
    args.func(args)
    args = _parser().parse_args(["retrieval", "eval", "--bench", str(bench), "--method", "magic"])
    assert args.func(args) == 2
    assert "unknown method" in capsys.readouterr().err
