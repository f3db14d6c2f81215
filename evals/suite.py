"""Eval suites: a TOML manifest next to JSONL questions (and usually a JSONL corpus).

A suite names what to index (a corpus file, or an existing tenant), who asks (the principal, and
restricted "canary" copies of documents it must never see), what to measure, and its gates.
`ragline eval run NAME` finds `data/evals/NAME/suite.toml`; a path to a manifest or its folder
works too.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from evals.datasets import SHARED_DATA

SUITES_DIR = Path(__file__).resolve().parent.parent / "data" / "evals"
CANARY_GROUP = "group:eval-canary"
"""The ACL of canary documents: the suite's principal never has this group."""
SPLITS = ("dev", "test", "fresh", "fresh2", "fresh3", "fresh4")
"""A question's `tags.split`: the half answer rules are chosen on (dev), the half they are checked
on (test), and the docs suite's questions written after them (fresh … fresh4:
data/evals/docs/README.md)."""


class SuiteError(Exception):
    """A manifest or question file is missing or malformed; the message names the file."""


class CorpusSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    path: str = ""
    """Corpus to index (JSONL records, Markdown or text; a file or folder), relative to the
    manifest. Empty with `tenant` set: use that tenant's existing documents."""
    external: str = ""
    """Corpus path relative to the shared data directory (`--data`); wins over `path` when
    that directory has it (a bigger corpus than the project ships)."""
    tenant: str = ""
    """Existing tenant to query (nothing is indexed); empty: the suite gets `eval-<name>`."""
    public: bool = True
    """Documents without their own ACL become public (else they need `allow`)."""
    allow: list[str] = msgspec.field(default_factory=list)
    """ACL for documents without their own."""
    canaries: int = 0
    """Restricted copies of this many documents (ACL `group:eval-canary`) are indexed too: any
    of them in a result is an ACL violation."""


class PrincipalSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    user: str = "eval"
    groups: list[str] = msgspec.field(default_factory=lambda: ["eval"])


class RequestSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    top_k: int | None = None
    """Sources per answer; None uses the service's default."""
    max_tokens: int | None = None
    """Cap on answer tokens; None uses the service's default."""
    search_top_k: int = 20
    """Chunks fetched by the retrieval pass (`/v1/search`) for the ranking metrics."""


class MetricsSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    retrieval_k: list[int] = msgspec.field(default_factory=lambda: [1, 5, 10])
    """Cut-offs for recall@k and hit@k (nDCG and MRR are always @10)."""
    answers: bool = True
    """Exact match, token F1 and containment against gold answers."""
    abstention: bool = True
    """Did the answer say the sources don't answer (on unanswerable questions)?"""
    groundedness: bool = True
    """Offline groundedness and citation precision/recall of every answer."""


class GatesSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    min: dict[str, float] = msgspec.field(default_factory=dict)
    """Metric -> lowest acceptable value."""
    max: dict[str, float] = msgspec.field(default_factory=dict)
    """Metric -> highest acceptable value."""
    max_regression: dict[str, float | str] = msgspec.field(default_factory=dict)
    """Metric -> largest allowed worsening against `--baseline`: a number (absolute) or "10%"."""


class Manifest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: str
    description: str = ""
    questions: str = "questions.jsonl"
    attribution: str = ""
    corpus: CorpusSpec = msgspec.field(default_factory=CorpusSpec)
    principal: PrincipalSpec = msgspec.field(default_factory=PrincipalSpec)
    request: RequestSpec = msgspec.field(default_factory=RequestSpec)
    metrics: MetricsSpec = msgspec.field(default_factory=MetricsSpec)
    gates: GatesSpec = msgspec.field(default_factory=GatesSpec)
    abstain_patterns: list[str] = msgspec.field(default_factory=list)
    """Extra regular expressions that mark an answer as an abstention."""


class Question(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    id: str
    question: str
    lang: str = "en"
    answerable: bool = True
    answers: list[str] = msgspec.field(default_factory=list)
    """Gold answers (any one counts); empty: no answer metrics for this question."""
    gold_docs: dict[str, int] = msgspec.field(default_factory=dict)
    """Relevant document id -> graded relevance (> 0)."""
    evidence: dict[str, list[str]] = msgspec.field(default_factory=dict)
    """Gold document id -> the sentences of it that answer (for the evidence-word metrics)."""
    tags: dict[str, str] = msgspec.field(default_factory=dict)
    """Extra slices, e.g. {"split": "test"}."""


class CorpusDoc(msgspec.Struct, kw_only=True):
    """A corpus record as the suite file has it (the indexing JSONL record format)."""

    id: str
    text: str
    title: str = ""
    lang: str = ""
    acl: list[str] | None = None


class Suite(msgspec.Struct, kw_only=True):
    manifest: Manifest
    root: Path
    questions: list[Question]
    corpus_path: Path | None

    @property
    def name(self) -> str:
        return self.manifest.name

    def tenant(self, override: str | None = None) -> str:
        return override or self.manifest.corpus.tenant or f"eval-{self.name}"

    def corpus(self) -> Iterator[CorpusDoc]:
        """Records of a JSONL corpus (other formats: nothing; their texts come from results)."""
        path = self.corpus_path
        if path is None or path.suffix.lower() not in {".jsonl", ".ndjson"}:
            return
        decoder = msgspec.json.Decoder(_Record)
        with path.open("rb") as fh:
            for line in fh:
                if line.strip():
                    rec = decoder.decode(line)
                    rid = rec.id if rec.id is not None else rec.id_
                    acl = [rec.acl] if isinstance(rec.acl, str) else rec.acl
                    yield CorpusDoc(
                        id=str(rid), text=rec.text, title=rec.title, lang=rec.lang, acl=acl
                    )


class _Record(msgspec.Struct, kw_only=True):
    id: str | int | None = None
    id_: str | int | None = msgspec.field(default=None, name="_id")
    title: str = ""
    text: str
    lang: str = ""
    acl: list[str] | str | None = None


def find_manifest(name: str, suites_dir: Path = SUITES_DIR) -> Path:
    """A suite name (under data/evals), a folder with suite.toml, or a manifest path."""
    path = Path(name)
    if path.is_file():
        return path
    if path.is_dir() and (path / "suite.toml").is_file():
        return path / "suite.toml"
    shipped = suites_dir / name / "suite.toml"
    if shipped.is_file():
        return shipped
    known = ", ".join(sorted(p.parent.name for p in suites_dir.glob("*/suite.toml")))
    raise SuiteError(f"no suite {name!r} (shipped suites: {known or 'none'})")


def load_suite(name: str, *, data_dir: Path | None = None, suites_dir: Path = SUITES_DIR) -> Suite:
    manifest_path = find_manifest(name, suites_dir)
    root = manifest_path.parent
    try:
        raw: dict[str, Any] = tomllib.loads(manifest_path.read_text(encoding="utf-8"))
        manifest = msgspec.convert(raw, Manifest)
    except (OSError, tomllib.TOMLDecodeError, msgspec.ValidationError) as exc:
        raise SuiteError(f"{manifest_path}: {exc}") from exc
    questions = read_questions(root / manifest.questions)
    return Suite(
        manifest=manifest,
        root=root,
        questions=questions,
        corpus_path=_corpus_path(manifest, root, data_dir or SHARED_DATA),
    )


def _corpus_path(manifest: Manifest, root: Path, data_dir: Path) -> Path | None:
    spec = manifest.corpus
    if spec.external and (data_dir / spec.external).exists():
        return data_dir / spec.external
    if spec.path:
        path = (root / spec.path).resolve()
        if not path.exists():
            raise SuiteError(f"suite {manifest.name}: corpus {path} does not exist")
        return path
    if spec.external:
        raise SuiteError(
            f"suite {manifest.name}: corpus {spec.external} not found under {data_dir} "
            "(give --data DIR, the shared data directory)"
        )
    if not spec.tenant:
        raise SuiteError(f"suite {manifest.name}: give corpus.path or corpus.tenant")
    return None


def read_questions(path: Path) -> list[Question]:
    decoder = msgspec.json.Decoder(Question)
    out: list[Question] = []
    try:
        with path.open("rb") as fh:
            for n, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        out.append(decoder.decode(line))
                    except msgspec.DecodeError as exc:
                        raise SuiteError(f"{path}:{n}: {exc}") from exc
    except OSError as exc:
        raise SuiteError(f"{path}: {exc.strerror}") from exc
    ids = [q.id for q in out]
    if len(set(ids)) != len(ids):
        raise SuiteError(f"{path}: question ids are not unique")
    return out
