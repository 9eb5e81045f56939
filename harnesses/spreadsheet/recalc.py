"""Recalculate formulas in a workbook so that its cells carry values for scoring.

openpyxl writes formulas without cached values (and drops the cached values of every formula it re-saves), so a
workbook produced by a program reads as empty formula cells under `data_only=True`. Before scoring, the
harness recalculates the produced workbook, as SpreadsheetBench's own pipeline does (it opens every output in
Excel on Windows, or LibreOffice elsewhere).

Two engines:

* `LibreOfficeRecalc` (the default; see `harness_description.md` and `benchmarks/bench_recalc.py` for the
  measurement behind the choice): LibreOffice Calc headless converts the workbook to xlsx, which computes
  every formula without a cached value. Needs the `soffice` binary (Debian/Ubuntu:
  `apt-get install -y libreoffice-calc-nogui`). Each worker thread gets its own LibreOffice user profile, so
  parallel rollouts do not collide.
* `FormulasRecalc`: the pure-Python `formulas` package (`pip install formulas`); computes the formula cells and
  writes them back as plain values.

Why LibreOffice (measured with `benchmarks/bench_recalc.py --first-case-only` on the shipped tasks, 2 shared
CPU cores): every answer workbook that holds formulas was re-saved with openpyxl (dropping its cached values, as
a program's output would) and recalculated; the result was scored against the original answer (Excel's values)
and as the harness scores it (against the answer recalculated with the same engine where it lacks values).

| engine (test case 1 of each task) | workbooks | pass: Excel values | pass: as the harness scores | errors | s/workbook mean | max |
| --- | --- | --- | --- | --- | --- | --- |
| none (openpyxl re-save) | 27 | 2 | 2 | 0 | 0 | 0 |
| LibreOffice 7.4.7 headless | 27 | 24 | 25 | 0 | 10.7 | 15.4 |
| formulas 1.3.4 | 27 | 18 | 19 | 5 | 20.4 | 60 (timeout) |

(2026-12-01; on 2026-11-30, less loaded, formulas passed 19 against Excel's values with 4 errors: its timeouts
depend on the machine's load.) On all 81 formula workbooks (3 cases each) LibreOffice passed 71/81 against
Excel's values. Its misses: XLOOKUP (not in LibreOffice 7.4; task 57072), an Excel-365 implicit array formula
(59902), one date calculation (30468 case 2), and 208-20, whose answer file itself has no cached values (it
passes as the harness scores). `formulas` failed on structured table references (`Data[Cost]`), TRANSPOSE
broadcasting and HYPERLINK, and timed out on three workbooks, but it does handle XLOOKUP. Seconds include a
fresh process (and LibreOffice profile) per workbook; the harness reuses a profile per thread and recalculates
all test cases of a SUBMIT in one engine start. `formulas` runs in a child process with a time limit
(`timeout_s` per workbook, default 120 s).

`get_recalculator(name)` returns one of them, or raises `RecalcUnavailable` with the install command. The
default, `auto`, is LibreOffice where `soffice` is installed and otherwise `formulas` (a core dependency, so a
machine with only Python works), with a one-line notice, once per process, naming the Debian package for full
fidelity. `needs_recalc(path)` says whether a workbook has formula cells without cached values at all.
"""

from __future__ import annotations

import atexit
import functools
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
import warnings
import zipfile
from abc import ABC, abstractmethod
from pathlib import Path

import openpyxl

log = logging.getLogger(__name__)

LIBREOFFICE_DEBIAN_PACKAGE = "libreoffice-calc-nogui"
LIBREOFFICE_INSTALL_HINT = (f"install LibreOffice Calc, e.g. `apt-get install -y {LIBREOFFICE_DEBIAN_PACKAGE}` "
                            "on Debian/Ubuntu")
FORMULAS_FALLBACK_NOTICE = (
    "spreadsheet: LibreOffice (soffice) not found, so formulas are recalculated with the pure-Python `formulas` "
    "package, which gets fewer workbooks right (19 vs 25 of 27 in benchmarks/bench_recalc.py); for full fidelity "
    f"`apt-get install -y {LIBREOFFICE_DEBIAN_PACKAGE}`")


class RecalcError(RuntimeError):
    """Recalculating one workbook failed (bad file, engine crash, timeout)."""


class RecalcUnavailable(RuntimeError):
    """The requested recalculation engine is not installed."""


def needs_recalc(path: Path) -> bool:
    """True if some cell holds a formula (the xml has <f> elements) but no cached value (<v>) for it."""
    try:
        with zipfile.ZipFile(path) as zf:
            for name in zf.namelist():
                if name.startswith("xl/worksheets/") and name.endswith(".xml"):
                    data = zf.read(name)
                    if b"<f" in data and _formula_without_value(data):
                        return True
    except zipfile.BadZipFile:
        return False  # the scorer reports the corrupt file
    return False


_CELL = re.compile(rb"<c\b[^>]*?(?<!/)>(.*?)</c>", re.DOTALL)
_FORMULA = re.compile(rb"<f[\s>/]")
_VALUE = re.compile(rb"<v(?:\s[^>]*)?>[^<]")


def _formula_without_value(sheet_xml: bytes) -> bool:
    # A computed cell looks like <c r="B2"><f>SUM(A1:A3)</f><v>6</v></c>; openpyxl writes <v /> instead.
    return any(_FORMULA.search(m.group(1)) and not _VALUE.search(m.group(1)) for m in _CELL.finditer(sheet_xml))


def has_cached_formula_values(path: Path) -> bool:
    """True if some formula cell carries a cached value (a workbook Excel saved, not one openpyxl wrote)."""
    try:
        with zipfile.ZipFile(path) as zf:
            return any(_FORMULA.search(m.group(1)) and _VALUE.search(m.group(1))
                       for name in zf.namelist() if name.startswith("xl/worksheets/") and name.endswith(".xml")
                       for m in _CELL.finditer(zf.read(name)))
    except zipfile.BadZipFile:
        return False


def keep_cached_values(original: Path, recalculated: Path) -> None:
    """Rewrite `recalculated` as a values-only workbook in which every value `original` already had wins.

    Engines recompute more than the missing cells: LibreOffice 7.4 replaced Excel's cached values of 12 cells
    in task 57072 (XLOOKUP) and 14 in 59902 (an implicit array formula). A value Excel computed is the better
    one, so the engine only fills the formula cells that had no value."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        before = openpyxl.load_workbook(original, data_only=True)
        after = openpyxl.load_workbook(recalculated, data_only=True)
    for ws in before.worksheets:
        if ws.title not in after.sheetnames:
            continue
        target = after[ws.title]
        for row in ws.iter_rows():
            for cell in row:
                if cell.value is not None:
                    target.cell(row=cell.row, column=cell.column).value = cell.value
    after.save(recalculated)


def recalculate(engine: "Recalculator", pairs: list[tuple[Path, Path]]) -> list[str | None]:
    """Recalculate each (src, dest) in one engine batch, then put back the values `src` already had (see
    `keep_cached_values`); per pair None on success or the error message. Outputs and answers both go here."""
    errors = engine.recalc_many(pairs)
    for n, ((src, dest), error) in enumerate(zip(pairs, errors)):
        if error is None and has_cached_formula_values(src):
            try:
                keep_cached_values(src, dest)
            except Exception as exc:  # openpyxl raises many kinds of errors on odd files
                errors[n] = f"could not keep the cached values of {Path(src).name}: {type(exc).__name__}: {exc}"
    return errors


def find_soffice() -> str | None:
    """The LibreOffice binary on PATH, or None."""
    return shutil.which("soffice") or shutil.which("libreoffice")


class Recalculator(ABC):
    name: str

    @property
    @abstractmethod
    def version(self) -> str:
        """The engine and its version (part of the key under which recalculated answer workbooks are cached)."""

    @abstractmethod
    def recalc(self, src: Path, dest: Path) -> None:
        """Write a copy of `src` to `dest` whose formula cells carry computed values."""

    def recalc_many(self, pairs: list[tuple[Path, Path]]) -> list[str | None]:
        """Recalculate several workbooks; per pair None on success or the error message."""
        errors: list[str | None] = []
        for src, dest in pairs:
            try:
                self.recalc(src, dest)
                errors.append(None)
            except RecalcError as exc:
                errors.append(str(exc))
        return errors


class LibreOfficeRecalc(Recalculator):
    name = "libreoffice"

    def __init__(self, soffice: str | None = None, timeout_s: float = 120.0) -> None:
        found = soffice or find_soffice()
        if not found:
            raise RecalcUnavailable(f"LibreOffice (soffice) is not installed: {LIBREOFFICE_INSTALL_HINT}, "
                                    "or choose the `formulas` engine")
        self.soffice = found
        self.timeout_s = timeout_s
        self._local = threading.local()
        self._profiles: list[Path] = []
        self._lock = threading.Lock()
        atexit.register(self.close)  # the per-thread profiles are temporary folders

    @functools.cached_property
    def version(self) -> str:
        try:  # fast: `--version` answers without starting the office
            out = subprocess.run([self.soffice, "--version"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        return out.strip().splitlines()[0] if out.strip() else f"LibreOffice at {os.path.realpath(self.soffice)}"

    def _profile(self) -> Path:
        profile = getattr(self._local, "profile", None)
        if profile is None:
            profile = Path(tempfile.mkdtemp(prefix="raso-lo-profile-"))
            self._local.profile = profile
            with self._lock:
                self._profiles.append(profile)
        return profile

    def recalc(self, src: Path, dest: Path) -> None:
        (error,) = self.recalc_many([(src, dest)])
        if error is not None:
            raise RecalcError(error)

    def recalc_many(self, pairs: list[tuple[Path, Path]]) -> list[str | None]:
        """One LibreOffice start converts all the workbooks (start-up dominates the cost)."""
        if not pairs:
            return []
        with tempfile.TemporaryDirectory(prefix="raso-lo-") as tmp:
            indir, outdir = Path(tmp) / "in", Path(tmp) / "out"
            indir.mkdir()
            staged = []
            for i, (src, _) in enumerate(pairs):
                # LibreOffice names each result after its input: stage under fixed, safe, distinct names.
                path = indir / f"book{i}-{uuid.uuid4().hex[:8]}.xlsx"
                shutil.copyfile(src, path)
                staged.append(path)
            cmd = [self.soffice, f"-env:UserInstallation={self._profile().as_uri()}", "--headless", "--norestore",
                   "--nolockcheck", "--nodefault", "--calc", "--convert-to", "xlsx:Calc MS Excel 2007 XML",
                   "--outdir", str(outdir), *map(str, staged)]
            env = {**os.environ, "HOME": str(self._profile()), "SAL_USE_VCLPLUGIN": "svp"}
            timeout = self.timeout_s * len(pairs)
            failure = None
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                    start_new_session=True)
            try:
                out, err = proc.communicate(timeout=timeout)
                if proc.returncode != 0:
                    failure = f"exit {proc.returncode}: {(err or out).strip()[:300]}"
            except subprocess.TimeoutExpired:
                # `soffice` is a launcher script: kill the whole group so soffice.bin does not linger.
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                failure = f"LibreOffice did not finish within {timeout:.0f}s"
            errors: list[str | None] = []
            for (src, dest), path in zip(pairs, staged):
                produced = outdir / path.name
                if produced.is_file():
                    Path(dest).parent.mkdir(parents=True, exist_ok=True)
                    shutil.move(str(produced), dest)
                    errors.append(None)
                else:
                    errors.append(f"LibreOffice could not recalculate {Path(src).name}"
                                  + (f" ({failure})" if failure else " (the file was not converted)"))
            return errors

    def close(self) -> None:
        with self._lock:
            for profile in self._profiles:
                shutil.rmtree(profile, ignore_errors=True)
            self._profiles.clear()


class FormulasRecalc(Recalculator):
    name = "formulas"

    def __init__(self, timeout_s: float = 120.0) -> None:
        if importlib.util.find_spec("formulas") is None:
            raise RecalcUnavailable("the `formulas` package is not installed: `pip install formulas`, "
                                    "or choose the `libreoffice` engine")
        self.timeout_s = timeout_s

    @property
    def version(self) -> str:
        return f"formulas {importlib.metadata.version('formulas')}"

    def recalc(self, src: Path, dest: Path) -> None:
        (error,) = self.recalc_many([(src, dest)])
        if error is not None:
            raise RecalcError(error)

    def recalc_many(self, pairs: list[tuple[Path, Path]]) -> list[str | None]:
        """All workbooks in one child process with a time limit: the package can take minutes on a large
        workbook (two of the shipped answers did not finish in 60 s), and a rollout must not hang on it."""
        if not pairs:
            return []
        job = json.dumps([[str(Path(src).resolve()), str(Path(dest).resolve())] for src, dest in pairs])
        timeout = self.timeout_s * len(pairs)
        proc = subprocess.Popen([sys.executable, "-c", _FORMULAS_CHILD, job, __file__], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return [f"formulas did not finish within {timeout:g}s ({Path(src).name})" for src, _ in pairs]
        try:
            errors = json.loads(out.strip().splitlines()[-1])
        except (IndexError, ValueError):
            errors = None
        if not isinstance(errors, list) or len(errors) != len(pairs):
            detail = (err or out).strip()[-300:]
            return [f"formulas could not recalculate {Path(src).name} (exit {proc.returncode}: {detail})"
                    for src, _ in pairs]
        return errors


# The child process of FormulasRecalc: recalculates each [src, dest] pair, prints the list of errors as JSON.
# It loads this file alone (stdlib and openpyxl), not the harness package and what that imports.
_FORMULAS_CHILD = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("raso_formulas_recalc", sys.argv[2])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
errors = []
for src, dest in json.loads(sys.argv[1]):
    try:
        module._formulas_recalc(src, dest)
        errors.append(None)
    except module.RecalcError as exc:
        errors.append(str(exc))
print(json.dumps(errors))
"""


def _formulas_recalc(src: Path, dest: Path) -> None:
    """The `formulas` computation itself (runs in the engine's child process)."""
    import formulas

    src, dest = Path(src).resolve(), Path(dest)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = formulas.ExcelModel().loads(str(src)).finish()
            solution = model.calculate()
    except Exception as exc:  # the package raises many kinds of errors on unsupported content
        raise RecalcError(f"formulas could not recalculate {src.name}: {type(exc).__name__}: {exc}") from exc
    computed: dict[tuple[str, str], object] = {}
    for key, value in solution.items():
        ref = str(key)
        if "!" not in ref or ":" in ref.rpartition("!")[2]:
            continue
        sheet = ref.rpartition("!")[0].split("]")[-1].strip("'").upper()
        raw = getattr(value, "value", value)
        try:
            raw = raw[0][0]
        except (TypeError, IndexError, KeyError):
            pass
        if hasattr(raw, "item"):
            raw = raw.item()
        computed[(sheet, ref.rpartition("!")[2].upper())] = raw
    try:
        wb = openpyxl.load_workbook(src)
    except Exception as exc:
        raise RecalcError(f"cannot open {src.name}: {exc}") from exc
    for ws in wb.worksheets:
        for row in ws.iter_rows():
            for cell in row:
                if cell.data_type == "f":
                    value = computed.get((ws.title.upper(), cell.coordinate))
                    if isinstance(value, str) and value.startswith("#"):
                        cell.value = value  # Excel error codes stay text
                    elif value is None or isinstance(value, (int, float, str, bool)):
                        cell.value = value
                    else:
                        cell.value = str(value)
    dest.parent.mkdir(parents=True, exist_ok=True)
    wb.save(dest)


RECALC_ENGINES = {"libreoffice": LibreOfficeRecalc, "formulas": FormulasRecalc}
RECALC_CHOICES = ("auto", *RECALC_ENGINES)
_fallback_noticed = False


def get_recalculator(name: str = "auto") -> Recalculator:
    """The named engine; `auto` is LibreOffice when installed, else `formulas` with a one-time notice."""
    global _fallback_noticed
    if name == "auto":
        if find_soffice() is not None:
            return LibreOfficeRecalc()
        engine = FormulasRecalc()
        if not _fallback_noticed:
            _fallback_noticed = True
            log.warning(FORMULAS_FALLBACK_NOTICE)
        return engine
    if name not in RECALC_ENGINES:
        raise ValueError(f"unknown recalculation engine {name!r}; choose one of {list(RECALC_CHOICES)}")
    return RECALC_ENGINES[name]()
