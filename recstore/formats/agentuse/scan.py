"""Scanning an agentuse tree on disk: detect the layout (data root, project, ``session/``
container or one session), read every file of each top-level session (raw text + SHA-256) and
attach top-level orphans to their parents. The only module of the package that reads files."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from recstore.formats.agentuse.fields import parse_json
from recstore.formats.agentuse.model import (
    SESSION_DIR_NAME,
    SESSION_FILE,
    SUBAGENT_DIR,
    Problem,
    Scan,
    SessionTree,
    TreeFile,
)

_TMP_FILE = re.compile(r".*\.(json|txt|jsonl)\.[^/]+\.tmp|.*\.tmp")


_REPORT_FILES = {"replay.json": "replay_report", "result-test.json": "result_report"}


_SESSION_LEVEL_FILES = {
    SESSION_FILE: "session",
    "tools.json": "tools",
    "context.json": "context",
    "effect-wal.jsonl": "effect_wal",
    **_REPORT_FILES,
}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _is_session_dir(path: Path, parent_is_container: bool) -> bool:
    if (path / SESSION_FILE).is_file():
        return True
    # A session dir whose session.json is missing (§4.2.3) still has its ULID-agent name.
    return parent_is_container and SESSION_DIR_NAME.fullmatch(path.name) is not None


def _find_containers(root: Path) -> tuple[str, list[Path]]:
    """The ``session/`` containers under ``root`` and the detected layout."""
    if _is_file(root / SESSION_FILE):
        return "session", [root.parent]
    if root.name == "session" or any(
        child.is_dir() and _is_file(child / SESSION_FILE) for child in _subdirs(root)
    ):
        return "session_container", [root]
    if (root / "session").is_dir():
        return "project", [root / "session"]
    for base in (root, root / "agentuse"):
        if (base / "project").is_dir():
            return "data_root", [
                p / "session" for p in _subdirs(base / "project") if (p / "session").is_dir()
            ]
    return "unknown", []


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False where a folder cannot be entered (a reader reports it)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _subdirs(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return []


def is_agentuse_tree(path: str | Path) -> bool:
    """True if ``path`` is an agentuse data root, project dir, session container or session."""
    p = Path(path)
    return p.is_dir() and bool(_find_containers(p)[1])


def _read_file(path: str, rel: str, kind: str, problems: list[Problem]) -> TreeFile | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:  # removed while we scanned (a live run); other I/O errors surface
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(
            Problem(
                rel,
                f"not UTF-8 text (invalid byte at offset {exc.start}); skipped",
                False,
                path,
                "not_utf8",
            )
        )
        return None
    return TreeFile(rel, kind, _sha256(data), len(data), text, path)


def _collect_session(path: Path, rel: str, out: list[TreeFile], problems: list[Problem]) -> None:
    """All files of the session at ``path`` (recursing into ``subagent/``)."""
    for entry in sorted(path.iterdir()):
        entry_rel = f"{rel}/{entry.name}"
        if entry.is_file():
            if _TMP_FILE.fullmatch(entry.name):
                problems.append(
                    Problem(
                        entry_rel,
                        "leftover temp file of an interrupted atomic write; ignored",
                        False,
                        str(entry),
                        "tmp_file",
                    )
                )
                continue
            kind = _SESSION_LEVEL_FILES.get(entry.name) or (
                "checkpoint" if entry.suffix == ".json" else "other"
            )
            tree_file = _read_file(str(entry), entry_rel, kind, problems)
            if tree_file:
                out.append(tree_file)
        elif entry.name == SUBAGENT_DIR:
            for child in _subdirs(entry):
                if _is_session_dir(child, True):
                    _collect_session(child, f"{entry_rel}/{child.name}", out, problems)
                else:
                    problems.append(
                        Problem(
                            f"{entry_rel}/{child.name}",
                            "subagent directory is not a session (no session.json, name not <ULID>-<agent>); skipped",
                            False,
                            str(child),
                            "not_session",
                        )
                    )
        elif entry.is_dir():
            _collect_message_dir(entry, entry_rel, out, problems)


def _walk_files(path: str, rel: str) -> list[tuple[str, str]]:
    """(absolute path, path relative to the message dir) of every file below ``path``, sorted;
    os.scandir because pathlib's per-path parsing dominated scans of big trees."""
    found = []
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:  # removed while we scanned
        return []
    for entry in entries:
        sub = f"{rel}/{entry.name}" if rel else entry.name
        if entry.is_dir(follow_symlinks=False):
            found.extend(_walk_files(entry.path, sub))
        elif entry.is_file():
            found.append((entry.path, sub))
    return sorted(found, key=lambda f: f[1])


def _message_file_kind(inner: str) -> str:
    head, _, name = inner.partition("/")
    if inner == "message.json":
        return "message"
    if head == "part" and "/" not in name and name.endswith(".json"):
        return "part"
    if head == "artifact" and "/" not in name:
        return "artifact"
    return "other"


def _collect_message_dir(
    path: Path, rel: str, out: list[TreeFile], problems: list[Problem]
) -> None:
    for file, inner in _walk_files(str(path), ""):
        file_rel = f"{rel}/{inner}"
        if _TMP_FILE.fullmatch(inner.rsplit("/", 1)[-1]):
            problems.append(
                Problem(
                    file_rel,
                    "leftover temp file of an interrupted atomic write; ignored",
                    False,
                    file,
                    "tmp_file",
                )
            )
            continue
        tree_file = _read_file(file, file_rel, _message_file_kind(inner), problems)
        if tree_file:
            out.append(tree_file)


def _peek_session(files: Sequence[TreeFile], dir_rel: str) -> dict:
    """The parsed session.json at ``dir_rel`` (salvaged if need be), or {}."""
    for f in files:
        if f.rel_path == f"{dir_rel}/{SESSION_FILE}":
            value, _ = parse_json(f.text)
            return value if isinstance(value, dict) else {}
    return {}


def scan_tree(path: str | Path) -> Scan:
    """Walk an agentuse tree (layout auto-detected) and group its files by top-level session.

    Top-level directories that are really subagents (``parentSessionID`` set; a pre-2026-06-05
    resume bug wrote some there, §1.10) join their parent's tree when the parent is in the scan;
    otherwise they are reported as orphans and skipped.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise FileNotFoundError(str(path))
    layout, containers = _find_containers(root)
    problems: list[Problem] = []
    trees: list[SessionTree] = []
    if layout == "session":
        containers_dirs = [(root.parent, [root])]
    else:
        containers_dirs = [
            (c, [d for d in _subdirs(c) if _is_session_dir(d, True)]) for c in containers
        ]
    for _container, session_dirs in containers_dirs:
        by_dir: list[tuple[str, dict, list[TreeFile]]] = []
        for session_dir in session_dirs:
            files: list[TreeFile] = []
            _collect_session(session_dir, session_dir.name, files, problems)
            by_dir.append((session_dir.name, _peek_session(files, session_dir.name), files))
        trees.extend(_group_orphans(by_dir, problems))
    return Scan(str(root), layout, trees, problems)


def _session_ids_in(files: Iterable[TreeFile]) -> set[str]:
    """IDs of every session directory that owns one of ``files`` (from the directory names)."""
    ids = set()
    for f in files:
        if f.kind == "session":
            m = SESSION_DIR_NAME.fullmatch(f.rel_path.rsplit("/", 2)[-2])
            if m:
                ids.add(m.group("id"))
    return ids


def _group_orphans(
    by_dir: list[tuple[str, dict, list[TreeFile]]], problems: list[Problem]
) -> list[SessionTree]:
    trees: dict[str, SessionTree] = {}
    orphans: list[tuple[str, dict, list[TreeFile]]] = []
    for dir_name, info, files in by_dir:
        sid = session_id_of(info, dir_name)
        if info.get("parentSessionID"):
            orphans.append((dir_name, info, files))
        else:
            trees[dir_name] = SessionTree(sid, dir_name, files)
    owner_of: dict[str, SessionTree] = {}
    for tree in trees.values():
        for sid in _session_ids_in(tree.files) | {tree.session_id}:
            owner_of[sid] = tree
    pending = orphans
    while pending:  # an orphan's parent may itself be an orphan listed later
        progressed, rest = False, []
        for dir_name, info, files in pending:
            owner = owner_of.get(info["parentSessionID"])
            if owner is None:
                rest.append((dir_name, info, files))
                continue
            owner.files.extend(files)
            owner_of[session_id_of(info, dir_name)] = owner
            progressed = True
        pending = rest
        if not progressed:
            break
    for dir_name, info, files in pending:
        problems.append(
            Problem(
                f"{dir_name}/{SESSION_FILE}",
                f"orphaned subagent session: parent session {info['parentSessionID']} is not in this "
                f"tree; its {len(files)} file(s) were skipped",
                False,
                next((f.source_path for f in files if f.kind == "session"), ""),
                "orphan",
            )
        )
    return list(trees.values())


def session_id_of(info: dict, dir_name: str) -> str:
    sid = info.get("id")
    if isinstance(sid, str) and sid:
        return sid
    m = SESSION_DIR_NAME.fullmatch(dir_name)
    return m.group("id") if m else dir_name
