"""Skill retrieval evaluation and field-aware retrieval (pure IR: no LLM calls, no raso import).

* `metrics`  — Hit@1, Recall@K, nDCG@K, MRR, Completeness@K over ranked skill ids.
* `dataset`  — a retrieval dataset (queries with gold skill ids, a skill pool) as JSONL, and the
  reference-file benchmark built from a corpus manifest.
* `fields`   — per-field (name, description, body) sparse scores: TF-IDF cosine, BM25, BM25F.
* `dense`    — sentence embeddings (int8 ONNX MiniLM by default), an on-disk memory-mapped cache,
  brute-force cosine search.
* `fusion`   — six per-field scores per (query, skill) fused by uniform average or a small MLP.
"""
