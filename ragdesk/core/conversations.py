"""Conversations kept in the catalog: answers with everything needed to show them again.

An answer is stored with its question, options, snapshot name, model pack, timings, every
token with its posterior over the passages, and the passages themselves (id, title, text,
score, p(z|x)): it reopens with its heat map, citations and inspector after its snapshot was
removed. Questions and answers are searchable through SQLite FTS5 (``answers_fts``, catalog
schema 4). Deleting a conversation only marks it, so that "undo" can restore it; marked
conversations are purged later (:meth:`ConversationStore.purge_deleted`).

Every method is one catalog transaction; the store holds no state of its own and may be used
from any thread (the GUI calls it from its worker lanes, never from the event loop).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from ragdesk.core.atomic import write_bytes_atomic
from ragdesk.core.catalog import Catalog
from ragdesk.core.catalog.records import utcnow

# The values live in ragdesk.core.conversation_types; their old home re-exports them.
from ragdesk.core.conversation_types import (
    HIT_END,
    HIT_START,
    UNTITLED,
    ConversationRecord,
    SearchHit,
    StoredAnswer,
)
from ragdesk.core.errors import BadInputError, NotFoundError
from ragdesk.core.export import answer_from_json, conversation_json, conversation_markdown
from ragdesk.core.safe_json import check_strings, check_text, load_file_bounded
from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc

IMPORT_MAX_BYTES = 256 << 20
TITLE_CHARS = 80  # a conversation named after its first question keeps this much of it
KEEP_DELETED_DAYS = 30  # a deleted conversation can be restored for this long


def fts_query(user_text: str) -> str | None:
    """A safe FTS5 query for what a user typed: every word must occur, the last one as a
    prefix (search as you type). None when there is no word to look for.

    Each word is quoted, so FTS5 operators and punctuation in the text (``AND``, ``-``,
    ``:``, ``"``, ``*``) are taken literally instead of raising a syntax error.
    """
    words = _words(user_text, "search")
    if not words:
        return None
    quoted = ['"' + w.replace('"', '""') + '"' for w in words]
    quoted[-1] += "*"
    return " ".join(quoted)


def _words(user_text: str, what: str) -> list[str]:
    """The words of what a user typed. Control characters separate words: SQLite reads a
    NUL as the end of the query ("unterminated string" in the middle of a quoted word)."""
    check_text(user_text, what=what)
    return "".join(" " if ord(c) < 32 else c for c in user_text).split()


def _title(title: str) -> str:
    return " ".join(_words(title, "title"))


def _like_pattern(word: str) -> str:
    """``%word%`` for LIKE ... ESCAPE '\\', with the word's own ``%``, ``_`` and ``\\``
    taken literally."""
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _tokens_json(tokens: list[AnswerToken]) -> str:
    return json.dumps([[t.id, t.text, t.posterior, t.quoted_from] for t in tokens],
                      ensure_ascii=False)


def _tokens_from_json(raw: str) -> list[AnswerToken]:
    # answers stored before shown sources were kept have three elements per token
    return [AnswerToken(int(row[0]), str(row[1]), [float(p) for p in row[2]],
                        int(row[3]) if len(row) > 3 and row[3] is not None else None)
            for row in json.loads(raw)]


class ConversationStore:
    """Conversations and their answers in the catalog database."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    # ---- conversations ---------------------------------------------------------------

    _SELECT = """
        SELECT c.id, c.title, c.created_at, c.updated_at, c.deleted_at,
               (SELECT COUNT(*) FROM answers a WHERE a.conversation_id = c.id) AS n,
               (SELECT a.question FROM answers a WHERE a.conversation_id = c.id
                ORDER BY a.position LIMIT 1) AS first_question
        FROM conversations c"""

    @staticmethod
    def _record(r: Any) -> ConversationRecord:
        named = bool(r.title)
        if named:
            title = r.title
        elif r.first_question:
            title = " ".join(str(r.first_question).split())[:TITLE_CHARS]
        else:
            title = UNTITLED
        return ConversationRecord(id=int(r.id), title=title, named=named,
                                  created_at=r.created_at, updated_at=r.updated_at,
                                  answers=int(r.n), deleted_at=r.deleted_at)

    def _get(self, conn: Connection, conversation_id: int) -> ConversationRecord:
        row = conn.execute(text(self._SELECT + " WHERE c.id = :id"),
                           {"id": conversation_id}).fetchone()
        if row is None:
            raise NotFoundError(f"There is no conversation {conversation_id}.")
        return self._record(row)

    def create(self, title: str | None = None) -> ConversationRecord:
        """A new, empty conversation; without a title it is named after its first question."""
        now = utcnow()
        with self.catalog.transaction() as conn:
            cid = conn.execute(
                text("INSERT INTO conversations (title, created_at, updated_at) "
                     "VALUES (:t, :now, :now)"),
                {"t": _title(title or ""), "now": now}).lastrowid
            return self._get(conn, int(cid))

    def new_conversation(self) -> ConversationRecord:
        """An empty conversation to ask in: an unnamed one that is still empty when there is
        one (clicking "New" twice must not leave empty conversations behind), else a new one."""
        with self.catalog.transaction() as conn:
            row = conn.execute(text(
                "SELECT c.id FROM conversations c WHERE c.deleted_at IS NULL AND c.title = '' "
                "AND NOT EXISTS (SELECT 1 FROM answers a WHERE a.conversation_id = c.id) "
                "ORDER BY c.id DESC LIMIT 1")).fetchone()
            if row is not None:
                return self._get(conn, int(row.id))
        return self.create()

    def get(self, conversation_id: int) -> ConversationRecord:
        with self.catalog.transaction() as conn:
            return self._get(conn, conversation_id)

    def list_conversations(self, *, include_deleted: bool = False) -> list[ConversationRecord]:
        """Conversations, the most recently changed first; deleted ones only when asked."""
        where = "" if include_deleted else " WHERE c.deleted_at IS NULL"
        with self.catalog.transaction() as conn:
            rows = conn.execute(text(self._SELECT + where +
                                     " ORDER BY c.updated_at DESC, c.id DESC")).fetchall()
        return [self._record(r) for r in rows]

    def rename(self, conversation_id: int, title: str) -> ConversationRecord:
        """Give a name; an empty one goes back to naming it after its first question."""
        new = _title(title)
        with self.catalog.transaction() as conn:
            self._get(conn, conversation_id)
            conn.execute(text("UPDATE conversations SET title = :t WHERE id = :id"),
                         {"t": new, "id": conversation_id})
            return self._get(conn, conversation_id)

    def delete(self, conversation_id: int) -> None:
        """Mark it deleted: it leaves lists and searches, and :meth:`restore` brings it back."""
        with self.catalog.transaction() as conn:
            self._get(conn, conversation_id)
            conn.execute(text("UPDATE conversations SET deleted_at = :now "
                              "WHERE id = :id AND deleted_at IS NULL"),
                         {"now": utcnow(), "id": conversation_id})

    def restore(self, conversation_id: int) -> ConversationRecord:
        """Undo :meth:`delete` (until the conversation is purged)."""
        with self.catalog.transaction() as conn:
            self._get(conn, conversation_id)
            conn.execute(text("UPDATE conversations SET deleted_at = NULL WHERE id = :id"),
                         {"id": conversation_id})
            return self._get(conn, conversation_id)

    def purge_deleted(self, older_than_days: float | None = KEEP_DELETED_DAYS) -> int:
        """Remove for good the conversations deleted more than ``older_than_days`` ago (all
        deleted ones when None), with their answers; returns how many were removed. The app
        calls it at start: a deletion stays undoable for that long."""
        with self.catalog.transaction() as conn:
            if older_than_days is None:
                res = conn.execute(text("DELETE FROM conversations WHERE deleted_at IS NOT NULL"))
            else:
                cutoff = (datetime.now(timezone.utc) - timedelta(days=older_than_days)
                          ).isoformat(timespec="seconds")  # utcnow()'s format: compares as text
                res = conn.execute(text("DELETE FROM conversations WHERE deleted_at IS NOT NULL "
                                        "AND deleted_at < :cutoff"), {"cutoff": cutoff})
            return int(res.rowcount or 0)

    # ---- answers ---------------------------------------------------------------------

    def add_answer(self, conversation_id: int, answer: Answer, *, pack: str | None = None,
                   options: Mapping[str, object] | None = None) -> StoredAnswer:
        """Append an answer (with its passages and posteriors) to a conversation."""
        now = utcnow()
        opts = dict(options or {})
        with self.catalog.transaction() as conn:
            conv = self._get(conn, conversation_id)
            if conv.deleted_at is not None:
                raise NotFoundError(f"The conversation {conv.title!r} was deleted.")
            position = int(conn.execute(
                text("SELECT COALESCE(MAX(position) + 1, 0) FROM answers "
                     "WHERE conversation_id = :c"), {"c": conversation_id}).scalar_one())
            aid = int(conn.execute(text(
                "INSERT INTO answers (conversation_id, position, question, text, mode, "
                "decoding, snapshot, pack, options, logprob, temperature, style, grounded, "
                "retriever, cancelled, token_ids, tokens, timings, created_at, confidence, "
                "abstained, from_memory) VALUES "
                "(:c, :pos, :q, :t, :mode, :dec, :snap, :pack, :opts, :lp, :temp, :style, "
                ":grounded, :retr, :cancelled, :ids, :tokens, :timings, :now, :conf, "
                ":abstained, :memory)"),
                {"c": conversation_id, "pos": position, "q": answer.question,
                 "t": answer.text, "mode": answer.mode, "dec": answer.decoding,
                 "snap": answer.snapshot, "pack": pack,
                 "opts": json.dumps(opts, ensure_ascii=False), "lp": answer.logprob,
                 "temp": answer.temperature, "style": answer.style,
                 "grounded": int(answer.grounded), "retr": answer.retriever,
                 "cancelled": int(answer.cancelled), "ids": json.dumps(answer.token_ids),
                 "tokens": _tokens_json(answer.tokens), "timings": json.dumps(answer.timings),
                 "now": now, "conf": answer.confidence,
                 "abstained": int(answer.abstained),
                 "memory": int(answer.from_memory)}).lastrowid)
            if answer.docs:
                conn.execute(text(
                    "INSERT INTO answer_passages (answer_id, rank, passage_id, title, text, "
                    "score, prob, snapshot) VALUES (:a, :rank, :pid, :title, :text, :score, "
                    ":prob, :snap)"),
                    [{"a": aid, "rank": k, "pid": d.id, "title": d.title, "text": d.text,
                      "score": d.score, "prob": d.prob, "snap": d.snapshot}
                     for k, d in enumerate(answer.docs)])
            conn.execute(text("UPDATE conversations SET updated_at = :now WHERE id = :c"),
                         {"now": now, "c": conversation_id})
        return StoredAnswer(aid, conversation_id, position, answer, pack, opts, now)

    @staticmethod
    def _answers(conn: Connection, where: str, params: dict[str, object]) -> list[StoredAnswer]:
        rows = conn.execute(text(f"SELECT * FROM answers WHERE {where} ORDER BY position"),
                            params).fetchall()
        if not rows:
            return []
        docs: dict[int, list[RetrievedDoc]] = {int(r.id): [] for r in rows}
        marks = ",".join(str(int(r.id)) for r in rows)  # integers we read: safe to inline
        for p in conn.execute(text(
                f"SELECT * FROM answer_passages WHERE answer_id IN ({marks}) "
                "ORDER BY answer_id, rank")):
            docs[int(p.answer_id)].append(RetrievedDoc(
                int(p.passage_id), p.title, p.text, float(p.score), float(p.prob), p.snapshot))
        out = []
        for r in rows:
            answer = Answer(
                question=r.question, text=r.text, token_ids=json.loads(r.token_ids),
                tokens=_tokens_from_json(r.tokens), docs=docs[int(r.id)],
                logprob=float(r.logprob), mode=r.mode, decoding=r.decoding,
                snapshot=r.snapshot, timings=json.loads(r.timings),
                cancelled=bool(r.cancelled), temperature=float(r.temperature),
                style=r.style, grounded=bool(r.grounded), retriever=r.retriever,
                confidence=None if r.confidence is None else float(r.confidence),
                abstained=bool(r.abstained), from_memory=bool(r.from_memory))
            out.append(StoredAnswer(int(r.id), int(r.conversation_id), int(r.position), answer,
                                    r.pack, json.loads(r.options), r.created_at))
        return out

    def answers(self, conversation_id: int) -> list[StoredAnswer]:
        """The answers of a conversation in the order they were given."""
        with self.catalog.transaction() as conn:
            self._get(conn, conversation_id)
            return self._answers(conn, "conversation_id = :c", {"c": conversation_id})

    def get_answer(self, answer_id: int) -> StoredAnswer:
        with self.catalog.transaction() as conn:
            found = self._answers(conn, "id = :a", {"a": answer_id})
        if not found:
            raise NotFoundError(f"There is no answer {answer_id}.")
        return found[0]

    def delete_answer(self, answer_id: int) -> None:
        """Remove one answer for good (its passages go with it)."""
        with self.catalog.transaction() as conn:
            conn.execute(text("DELETE FROM answers WHERE id = :a"), {"a": answer_id})

    # ---- search ----------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 50) -> list[SearchHit]:
        """Answers whose question or text hold every word of ``query`` (the last word as a
        prefix), best match first; deleted conversations are left out."""
        match = fts_query(query)
        if match is None:
            return []
        sql = text(f"""
            SELECT a.id, a.conversation_id, a.question, a.created_at, c.title,
                   (SELECT a1.question FROM answers a1 WHERE a1.conversation_id = c.id
                    ORDER BY a1.position LIMIT 1) AS first_question,
                   snippet(answers_fts, -1, '{HIT_START}', '{HIT_END}', '…', 16) AS snip
            FROM answers_fts
            JOIN answers a ON a.id = answers_fts.rowid
            JOIN conversations c ON c.id = a.conversation_id
            WHERE answers_fts MATCH :q AND c.deleted_at IS NULL
            ORDER BY bm25(answers_fts), a.created_at DESC
            LIMIT :limit""")
        with self.catalog.transaction() as conn:
            rows = conn.execute(sql, {"q": match, "limit": int(limit)}).fetchall()
        return [SearchHit(int(r.id), int(r.conversation_id),
                          r.title or " ".join(str(r.first_question).split())[:TITLE_CHARS],
                          r.question, r.snip, r.created_at) for r in rows]

    def search_titles(self, query: str, *, limit: int = 20) -> list[ConversationRecord]:
        """Conversations whose given name holds every word of ``query`` (case-insensitive),
        newest first: a renamed conversation is found by its name."""
        words = _words(query, "search")
        if not words:
            return []
        # LIKE's own wildcards in what the user typed are literal (escaped with '\').
        clauses = " AND ".join(f"c.title LIKE :w{i} ESCAPE '\\'" for i in range(len(words)))
        params: dict[str, object] = {f"w{i}": _like_pattern(w) for i, w in enumerate(words)}
        params["limit"] = int(limit)
        with self.catalog.transaction() as conn:
            rows = conn.execute(text(
                self._SELECT + f" WHERE c.deleted_at IS NULL AND c.title != '' AND {clauses}"
                " ORDER BY c.updated_at DESC, c.id DESC LIMIT :limit"), params).fetchall()
        return [self._record(r) for r in rows]

    # ---- export ----------------------------------------------------------------------

    def export_json(self, conversation_id: int) -> dict[str, object]:
        conv = self.get(conversation_id)
        return conversation_json(conv.title, conv.created_at,
                                 [a.to_json() for a in self.answers(conversation_id)])

    def export_markdown(self, conversation_id: int) -> str:
        conv = self.get(conversation_id)
        return conversation_markdown([a.answer for a in self.answers(conversation_id)],
                                     title=conv.title)

    def export_to(self, conversation_id: int, path: Path) -> Path:
        """Write the conversation to ``path``: JSON for a ``.json`` name, else Markdown;
        atomically, so an export interrupted by a full disk leaves no half file."""
        _check_export_path(path)
        if path.suffix.lower() == ".json":
            body = json.dumps(self.export_json(conversation_id), ensure_ascii=False, indent=1)
        else:
            body = self.export_markdown(conversation_id)
        write_bytes_atomic(path, body.encode("utf-8"))
        return path

    def import_file(self, path: Path) -> ConversationRecord:
        """A new conversation from a JSON file that :meth:`export_to` wrote."""
        return self.import_json(load_file_bounded(path, max_bytes=IMPORT_MAX_BYTES))

    def import_json(self, data: Mapping[str, object]) -> ConversationRecord:
        """A new conversation from :meth:`export_json`'s output. Every answer is read before
        anything is written: a damaged export adds nothing."""
        check_strings(data)  # SQLite refuses lone surrogates only once half is written
        answers = data.get("answers") if isinstance(data, Mapping) else None
        if not isinstance(answers, list):
            raise BadInputError("This is not a ragdesk conversation export (it has no list "
                                "of answers).")
        parsed: list[tuple[Answer, str | None, dict[str, object]]] = []
        for n, d in enumerate(answers, 1):
            try:
                options = d.get("options") or {}
                if not isinstance(options, dict):
                    raise TypeError("options is not an object")
                pack = d.get("pack")
                parsed.append((answer_from_json(d), None if pack is None else str(pack),
                               options))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise BadInputError(f"Answer {n} of the export cannot be read ({exc!r}).") \
                    from exc
        conv = self.create(str(data.get("title") or ""))
        for answer, pack, options in parsed:
            self.add_answer(conv.id, answer, pack=pack, options=options)
        return self.get(conv.id)


def _check_export_path(path: Path) -> None:
    try:
        os.fsencode(path)
    except UnicodeEncodeError:
        raise BadInputError(f"The file name {str(path)!r} cannot be written: it is not valid "
                            "text.", hint="Choose another file name.") from None
    if path.is_dir():
        raise BadInputError(f"{path} is a folder.",
                            hint="Choose a file name to export to, such as "
                                 f"{path / 'conversation.md'}.")
