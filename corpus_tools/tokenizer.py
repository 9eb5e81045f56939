"""The BM25 tokenizer (one definition, used for documents and queries alike).

Rules, in order:
1. lower-case the text (Unicode `str.lower`);
2. split into maximal runs of Unicode letters and digits (regex `[^\\W_]+`), so punctuation,
   whitespace and underscores separate tokens: `openpyxl.load_workbook()` -> openpyxl, load, workbook;
3. drop tokens of one character or longer than 40 characters (list numbering, hashes, base64);
4. drop English stop words (the list below, close to the usual Lucene/NLTK core list).

No stemming: skill text is full of API names, file formats and commands whose exact forms matter,
and a stemmer is not among our dependencies. `TOKENIZER_VERSION` is stored in every saved index
and changes whenever these rules change, so an index is never queried with other rules.
"""

from __future__ import annotations

import re

TOKENIZER_VERSION = "words-lower-stop-v1"
MIN_TOKEN_CHARS = 2
MAX_TOKEN_CHARS = 40

# Maximal letter/digit runs of 2..40 characters; a longer run is skipped whole, not cut.
_TOKEN = re.compile(rf"(?<![^\W_])[^\W_]{{{MIN_TOKEN_CHARS},{MAX_TOKEN_CHARS}}}(?![^\W_])")

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before being below
    between both but by can cannot could couldn did didn do does doesn doing don down during each few for
    from further had hadn has hasn have haven having he her here hers herself him himself his how i if in
    into is isn it its itself just ll me more most mustn my myself no nor not now of off on once only or
    other our ours ourselves out over own re s same shan she should shouldn so some such t than that the
    their theirs them themselves then there these they this those through to too under until up ve very
    was wasn we were weren what when where which while who whom why will with won would wouldn you your
    yours yourself yourselves
    """.split()
)


def tokenize(text: str) -> list[str]:
    """Tokens of `text` under the rules in the module docstring."""
    stop = STOPWORDS
    return [t for t in _TOKEN.findall(text.lower()) if t not in stop]
