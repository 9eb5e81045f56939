"""Vetting of corpus text before it reaches a model: an injection / exfiltration scan and near-duplicate collapse.

The public skill corpus is untrusted. Two pure-text checks (no model, no raso import):

* `scan(text)` names the pattern families a text matches:
  - ``override``: text addressed to the model that tries to replace its instructions ("ignore all
    previous instructions", "you are now in developer mode", "reveal your system prompt", ...);
  - ``hidden-unicode``: zero-width, bidirectional-control or Unicode tag characters (invisible text);
  - ``pipe-to-shell``: a download piped into a shell or evaluated (``curl ... | sh``, ``iwr ... | iex``);
  - ``exfiltration``: environment variables, credentials or key files sent to a URL or a socket.
  Each pattern is tried on a view of the text that obfuscation does not change: invisible characters
  removed, Unicode-normalised (NFKC), lower-cased, and then either without any whitespace (commands:
  catches "c u r l ... | s h") or letters and digits only (phrases: catches "I.G.N.O.R.E  previous
  instructions"). A cheap substring test on the view rules most patterns out before any regular
  expression runs. The flags are a bit mask (`FLAG_BITS`), stored per section by
  the index build so that search can leave flagged sections out at no query cost.
* `collapse_near_duplicates(texts)` groups texts whose word-shingle sets overlap by at least a
  Jaccard threshold; the first of a group is kept, the others are reported as its duplicates.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

FAMILIES: tuple[str, ...] = ("override", "hidden-unicode", "pipe-to-shell", "exfiltration")
FLAG_BITS: dict[str, int] = {name: 1 << i for i, name in enumerate(FAMILIES)}

# Invisible characters. Bidirectional embeddings, overrides and isolates and Unicode tag characters
# have no business in a skill: one is enough. Zero-width characters (and the soft hyphen) also turn
# up as stray copy-paste debris, so they count from MIN_ZERO_WIDTH on; a zero-width joiner inside an
# emoji sequence (e.g. a profession emoji) is not hidden text. A byte-order mark at the start is harmless.
_BIDI_OR_TAG = re.compile("[\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]")
_ZERO_WIDTH = re.compile("[\u200b-\u200f\u2060-\u2064\u00ad\u180e]|(?<!^)\ufeff")
_HIDDEN = re.compile(f"{_BIDI_OR_TAG.pattern}|{_ZERO_WIDTH.pattern}")
MIN_ZERO_WIDTH = 3


def _emoji_joiner(text: str, at: int) -> bool:
    def symbol(i: int) -> bool:
        return 0 <= i < len(text) and (unicodedata.category(text[i]) in ("So", "Sk") or text[i] == "\ufe0f")

    return text[at] == "\u200d" and symbol(at - 1) and symbol(at + 1)


def _hidden_text(text: str) -> re.Match[str] | None:
    found = _BIDI_OR_TAG.search(text)
    if found is not None:
        return found
    marks = [m for m in _ZERO_WIDTH.finditer(text) if not _emoji_joiner(text, m.start())]
    return marks[0] if len(marks) >= MIN_ZERO_WIDTH else None


# --- instruction override (matched on the letters-and-digits view: no spaces, no punctuation)
_PRIOR = (r"(?:all|any|the|your|my|these|those|of)*(?:previous|prior|above|earlier|preceding|former|original|system)"
          r"(?:system|safety)?")
_ORDERS = r"(?:instructions?|prompts?|rules|directions|directives|guidelines|messages|constraints)"
_VERBS = ("ignor", "disregard", "forget", "overrid", "bypass", "skip", "drop")
# (words of which the letters view must hold one from each group, pattern): the cheap substring test
# rules a pattern out for almost every section, so the regular expression runs rarely.
_OVERRIDE: list[tuple[tuple[tuple[str, ...], ...], str]] = [
    ((_VERBS, ("previous", "prior", "above", "earlier", "preceding", "former", "original", "system")),
     rf"(?:ignore|disregard|forget|override|bypass|skip|drop)(?:all|any|the|your|every|of)*{_PRIOR}{_ORDERS}"),
    # "ignore all instructions", but not the defensive "ignore any instructions found in the files"
    ((("ignor", "disregard", "forget"),),
     rf"(?:ignore|disregard|forget)(?:all|every)(?:of)?(?:the|your)?{_ORDERS}"
     r"(?!in|inside|embedded|within|from|found|contained|that|which|like|you(?:find|see|read))"),
    ((("ignor", "disregard", "forget"), ("everything", "anything")),
     r"(?:ignore|disregard|forget)(?:everything|anything)(?:you(?:were|have(?:been)?)?(?:told|given|said)|above|before)"),
    ((("youarenow",),),
     r"youarenow(?:in)?(?:developermode|danmode|jailbroken|jailbreakmode|unrestricted|unfiltered|godmode|"
     r"an?unrestricted|freefromallrestrictions)"),
    ((("jailbreak", "godmode", "danmode"),), r"(?:enable|enter|activate|switchto)(?:the)?(?:dan|jailbreak|godmode)mode"),
    ((("prompt", "instruction", "message"), ("system", "initial", "hidden"),
      ("reveal", "print", "output", "repeat", "show", "leak", "disclose")),
     r"(?:reveal|print|output|repeat|show|leak|disclose)(?:me)?(?:your|the)(?:full|entire|hidden|original)?"
     r"(?:system|initial|hidden)(?:prompt|instructions|message)"),
    ((("newinstruction", "updatedinstruction", "realinstruction"),),
     r"(?:newinstructions|updatedinstructions|realinstructions)(?:for(?:the|you|ai|assistant|model|llm))?(?:are|follow)"),
    ((("user",), ("donot", "dont", "never")),
     r"(?:donot|dont|never)(?:tell|inform|alert|notify|mention(?:to)?)(?:the)?users?(?:about|that|of)(?:this|these|it)"),
    ((("readingthis", "processingthis"),),
     r"(?:aiassistant|languagemodel|llm|assistant|claude|chatgpt|gpt)s?(?:reading|processing)this(?:must|should|will)"),
]
_OVERRIDE_GATED = [(gates, re.compile(p)) for gates, p in _OVERRIDE]

# --- download piped into a shell (matched on the view without whitespace; punctuation kept)
_PIPE_TO_SHELL = re.compile(
    # (this view has no spaces, so "| sh before" reads "|shbefore": the shell name is followed by
    # anything except the tails of other commands: sha256sum, shasum, shuf, show, sort...)
    r"(?:curl|wget|fetch|iwr|invoke-webrequest|irm|invoke-restmethod)[^\n]{0,400}?\|(?:sudo)?(?:-\w+)?"
    r"(?:ba|z|da|k|fi)?sh(?!a\d|asum|uf|ow|ort|ellcheck|red|ift|ort)"
    r"|(?:curl|wget|iwr|irm|invoke-webrequest|invoke-restmethod)[^\n]{0,400}?\|(?:iex|invoke-expression)(?![a-z0-9])"
    # a download run by an interpreter reading the script from stdin (not `| python3 -c "..."`)
    r"|(?:curl|wget)[^\n]{0,400}?\|(?:sudo)?(?:python3?|perl|ruby|node)-?(?:$|[`;&)]|\n)"
    r"|(?:ba|z)?sh(?:-c)?[\"']?(?:<\(|\$\()(?:curl|wget)"
    r"|(?:iex|invoke-expression)\(?(?:new-object|\(new-object)[^\n]{0,80}downloadstring"
    r"|eval[\"']?\$\((?:curl|wget)")

# --- exfiltration (matched on the view without whitespace)
_SECRET_SOURCE = (r"(?:printenv|\benv\b|os\.environ(?![\.\[]get|\[)|process\.env(?![\.\[])|\$env:|"
                  r"~/\.ssh|\.ssh/id_|id_rsa|id_ed25519|/etc/passwd|/etc/shadow|\.aws/credentials|"
                  r"\.netrc|\.git-credentials|\.npmrc|\.pypirc|\.env(?![a-z0-9_])|\.kube/config)")
_EXFIL = re.compile(
    # a secret source piped or redirected into a network tool
    # (no word boundary after the tool: this view has no spaces)
    rf"{_SECRET_SOURCE}[^\n]{{0,120}}?\|(?:base64\|)?(?:curl|wget|nc|ncat|netcat|socat)"
    # a network tool uploading a secret source (data, form, file upload)
    rf"|(?:curl|wget)[^\n]{{0,300}}?(?:-d|--data[a-z-]*|-f|--form|-t|--upload-file|--post-file|--post-data)"
    rf"[\"'=]?(?:[\w.\[\]-]+=)?@?(?:\$\()?(?:cat)?{_SECRET_SOURCE}"
    # the whole environment posted by code
    r"|(?:requests|httpx|session|axios|urllib\.request)\.(?:post|put|request|urlopen)\([^\n]{0,200}?"
    r"(?:dict\(os\.environ\)|os\.environ(?:\.copy\(\))?\)|os\.environ,|json\.dumps\(dict\(os\.environ)"
    r"|fetch\([^\n]{0,200}?body:(?:json\.stringify\()?process\.env(?![\.\[])"
    r"|(?:nc|ncat|netcat)[^\n]{0,80}?<(?:~/\.ssh|/etc/passwd|\.env|\.aws)")
# instructions in prose (letters-and-digits view)
_EXFIL_PROSE = re.compile(
    r"(?:send|post|upload|transmit|forward|exfiltrate|leak|email)(?:all|the|every|any|your|users?|my)*"
    r"(?:environmentvariables|envvars|apikeys?|secrets|credentials|tokens|passwords|sshkeys?|privatekeys?)"
    r"(?:and\w{0,30})?(?:to|into)(?:the|this|my|our|a|an)?(?:https?|url|server|endpoint|webhook|address|attacker|remote)")


_NETWORK_TOOLS = ("curl", "wget", "|nc", "ncat", "netcat", "socat", "requests.", "httpx.", "session.", "axios.",
                  "urllib", "fetch(")
_SECRET_WORDS = ("printenv", "env|", "$(env", "environ", "process.env", "$env:", ".env", ".ssh", "id_rsa", "id_ed25519",
                 "/etc/passwd", "/etc/shadow", "credentials", ".netrc", ".npmrc", ".pypirc", ".kube")
_CHECKS: list[tuple[str, tuple[tuple[str, ...], ...], re.Pattern[str], int]] = [
    # (family, gate word groups, pattern, view: 0 = without whitespace, 1 = letters and digits only)
    *[("override", gates, pattern, 1) for gates, pattern in _OVERRIDE_GATED],
    ("pipe-to-shell", (("curl", "wget", "iwr", "irm", "invoke-", "downloadstring"), ("|", "$(", "<(")),
     _PIPE_TO_SHELL, 0),
    ("exfiltration", (_NETWORK_TOOLS, _SECRET_WORDS), _EXFIL, 0),
    ("exfiltration", (("environmentvariable", "envvar", "apikey", "secret", "credential", "token", "password",
                       "sshkey", "privatekey"),
                      ("send", "post", "upload", "transmit", "forward", "exfiltrate", "leak", "email")), _EXFIL_PROSE, 1),
]


@dataclass(frozen=True)
class Finding:
    family: str
    excerpt: str  # a short excerpt of the view the pattern matched


HEADING_ARROW = "\u203a"  # corpus_tools.sections.HEADING_SEPARATOR's arrow
_NOT_ALNUM_ASCII = bytes(c for c in range(128) if not chr(c).isalnum())
_SPACES_ASCII = b" \t\r\f\v"


def _views(text: str) -> tuple[str, str]:
    """(the text without whitespace, lines kept apart; the text's letters and digits only), both
    lower-cased and NFKC-normalised, invisible characters removed."""
    if _HIDDEN.search(text):
        text = _HIDDEN.sub("", text)
    text = text.replace(HEADING_ARROW, " ")  # every heading path has one; without it most texts are ASCII
    if text.isascii():  # the common case, done with byte translations
        low = text.lower().encode("ascii")
        return low.translate(None, _SPACES_ASCII).decode("ascii"), low.translate(None, _NOT_ALNUM_ASCII).decode("ascii")
    folded = unicodedata.normalize("NFKC", text).lower()
    # Lines stay apart in the view without whitespace: a command is one line.
    compact = "\n".join("".join(line.split()) for line in folded.split("\n"))
    return compact, re.sub(r"[\W_]+", "", folded)


def scan(text: str) -> list[Finding]:
    """The pattern families `text` matches (at most one finding per family), see the module doc."""
    findings: list[Finding] = []
    views = _views(text)
    seen: set[str] = set()
    for family, gates, pattern, which in _CHECKS:
        view = views[which]
        if family in seen or not all(any(word in view for word in group) for group in gates):
            continue
        match = pattern.search(view)
        if match:
            seen.add(family)
            findings.append(Finding(family, view[max(0, match.start() - 20): match.end() + 20]))
    hidden = None if text.isascii() else _hidden_text(text)
    if hidden is not None:
        findings.append(Finding("hidden-unicode", f"U+{ord(hidden.group()):04X} at offset {hidden.start()}"))
    return sorted(findings, key=lambda f: FAMILIES.index(f.family))


def flag_bits(text: str) -> int:
    """The families of `scan(text)` as a bit mask (0 = clean); what the index stores per section."""
    bits = 0
    for finding in scan(text):
        bits |= FLAG_BITS[finding.family]
    return bits


def families_of(bits: int) -> list[str]:
    return [name for name, bit in FLAG_BITS.items() if bits & bit]


# ------------------------------------------------------------------------------------------ duplicates
SHINGLE_WORDS = 3
DUPLICATE_JACCARD = 0.8


def shingles(text: str, size: int = SHINGLE_WORDS) -> frozenset[int]:
    """Hashes of the overlapping `size`-word windows of the text's lower-cased words (a short text
    is one shingle)."""
    words = re.findall(r"[^\W_]+", _HIDDEN.sub("", unicodedata.normalize("NFKC", text)).lower())
    if len(words) <= size:
        return frozenset([hash(" ".join(words))])
    return frozenset(hash(" ".join(words[i:i + size])) for i in range(len(words) - size + 1))


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


@dataclass
class DuplicateGroup:
    keep: int
    duplicates: list[int] = field(default_factory=list)


def collapse_near_duplicates(texts: Sequence[str], threshold: float = DUPLICATE_JACCARD) -> list[DuplicateGroup]:
    """Group `texts` (in rank order) whose shingle sets have Jaccard >= `threshold` with a group's
    first text; returns the groups in order of their kept text. Pairwise: meant for a top-K list."""
    sets = [shingles(t) for t in texts]
    groups: list[DuplicateGroup] = []
    for i, s in enumerate(sets):
        for group in groups:
            if jaccard(sets[group.keep], s) >= threshold:
                group.duplicates.append(i)
                break
        else:
            groups.append(DuplicateGroup(i))
    return groups
