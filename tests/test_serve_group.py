"""Group commit of live ingest (recstore.serve.group): POSTs that arrive while a batch commits
are stored together, and each is answered with its own summary once its records are committed.

Over HTTP against a real server, and in-process against a real ServedStore where the test holds
the writer so that POSTs must queue and join one batch."""

from __future__ import annotations

import json
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstore.serve.hold import ServedStore
from recstore.serve.ingest import ingest_body
from tests.serve_support import served

FIXTURE = Path(__file__).parent / "fixtures" / "aioc" / "simple-run.json"
BAD_LINE = b'{"runId": 3}'


def _line(run_id: str, question: str | None = None) -> bytes:
    record = json.loads(FIXTURE.read_text())
    record["runId"] = run_id
    if question is not None:  # a changed record: a new revision of a stored run
        record["question"] = question
    return json.dumps(record).encode() + b"\n"


def _posts() -> list[dict]:
    """Six POSTs: each with new records of its own, duplicates and a revision of stored runs,
    and two with bad lines (one of them nothing but)."""
    posts = []
    for i in range(6):
        new = [f"p{i}-{n}" for n in range(i + 1)]
        lines = [_line(run_id) for run_id in new]
        lines += [_line(f"seed-{n}") for n in range(i % 3)]  # stored before: duplicates
        revised = {1: ["seed-3"], 5: ["seed-4"]}.get(i, [])  # no other POST holds these
        lines += [_line(run_id, f"changed by {i}") for run_id in revised]
        bad = [2] if i == 3 else []
        if i == 3:
            lines.insert(1, BAD_LINE + b"\n")
        if i == 4:
            lines, new, bad = [BAD_LINE + b"\n", b"not json\n"], [], [1, 2]
        posts.append({"body": b"".join(lines), "new": new, "duplicate": i % 3 if i != 4 else 0,
                      "revised": revised, "bad": bad})
    return posts


def _check_summary(answer: dict, post: dict, request_id: str) -> None:
    assert answer["request_id"] == request_id
    assert answer["source_uri"].startswith(f"post:/v1/runrecords?request={request_id}&")
    assert answer["accepted"] == len(post["new"])
    assert answer["duplicate"] == post["duplicate"]
    assert answer["revised"] == len(post["revised"])
    assert answer["rejected"] == len(post["bad"])
    assert answer["sources"] == 1
    assert answer["run_keys"] == [f"aioc:{r}" for r in post["new"] + post["revised"]]
    assert [(r["source"], r["line"]) for r in answer["rejects"]] == [
        (answer["source_uri"], line) for line in post["bad"]]


def test_concurrent_posts_each_get_their_own_summary_and_are_queryable(tmp_path):
    """Six POSTs sent at once from six threads: each answer counts its own records only (new,
    duplicate, revised, rejected; its run keys and rejects), a bad line rejects in its own POST
    only, and every record of a POST is queryable, from its POST's source, when it is
    answered."""
    posts = _posts()
    start = threading.Barrier(len(posts))
    with served(tmp_path / "live.duckdb") as (url, _proc, _):
        seeds = b"".join(_line(f"seed-{n}") for n in range(6))
        assert httpx.post(url + "v1/runrecords", content=seeds, timeout=60, headers={
            "content-type": "application/x-ndjson"}).json()["accepted"] == 6

        def send(i: int) -> tuple[dict, list]:
            start.wait()
            answer = httpx.post(url + "v1/runrecords", content=posts[i]["body"], timeout=120,
                                headers={"content-type": "application/x-ndjson",
                                         "x-request-id": f"g-{i}"}).json()
            stored = httpx.get(url + "api/query", timeout=60, params={
                "q": f"SELECT run_id, source_uri FROM runs WHERE run_id LIKE 'p{i}-%' "
                     "OR source_uri LIKE 'post:/v1/runrecords?request=g-" + str(i) + "&%' "
                     "ORDER BY run_id"}).json()["rows"]
            return answer, stored

        with ThreadPoolExecutor(len(posts)) as pool:
            results = list(pool.map(send, range(len(posts))))
    for i, (answer, stored) in enumerate(results):
        post = posts[i]
        _check_summary(answer, post, f"g-{i}")
        assert stored == [[r, answer["source_uri"]] for r in sorted(post["new"] + post["revised"])]


def _hold_writer_while(store: ServedStore, bodies: list[bytes], spool: Path) -> list[dict]:
    """POST ``bodies`` from threads while this thread holds the store's writer, so that all but
    the first queue up behind it; release it once they do; their answers."""
    # a POST to a store the server has not written yet opens the writer first (to learn the
    # store's column types): one before the test holds it (a reject, no run)
    ingest_body(store, spool, BAD_LINE, "application/json", False)
    with ThreadPoolExecutor(len(bodies)) as pool:
        with store.writer():
            first = pool.submit(ingest_body, store, spool, bodies[0], "application/x-ndjson",
                                False, "q-0")
            _wait_until(lambda: store._group._taken)  # the first is taken and waits for us
            rest = [pool.submit(ingest_body, store, spool, body, "application/x-ndjson",
                                False, f"q-{i}") for i, body in enumerate(bodies[1:], 1)]
            _wait_until(lambda: len(store._group._waiting) == len(rest))
        return [future.result(timeout=120) for future in [first, *rest]]


def _wait_until(condition) -> None:
    for _ in range(6000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("the POSTs did not queue up")


def test_posts_that_queue_behind_a_commit_join_one_batch(tmp_path):
    """While a write holds the store, POSTs queue; they are then stored in one batch (one
    transaction), each answered with its own summary; the bad line of one rejects in it alone;
    every record is readable once its POST is answered."""
    posts = _posts()
    store = ServedStore(tmp_path / "held.duckdb")
    try:
        seeds = b"".join(_line(f"seed-{n}") for n in range(6))
        assert ingest_body(store, tmp_path, seeds, "application/x-ndjson", False)["accepted"] == 6
        answers = _hold_writer_while(store, [p["body"] for p in posts], tmp_path)
        for i, answer in enumerate(answers):
            _check_summary(answer, posts[i], f"q-{i}")
        with store.reader() as cur:
            batches = dict(cur.execute(
                "SELECT uri, batch_id FROM source_files WHERE uri LIKE 'post:%request=q-%'"
            ).fetchall())
            stored = {row[0] for row in cur.execute("SELECT run_id FROM runs").fetchall()}
    finally:
        store.close()
    queued = {batches[a["source_uri"]] for a in answers[1:]}
    assert len(queued) == 1 and batches[answers[0]["source_uri"]] not in queued
    assert stored >= {r for p in posts for r in p["new"]}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.sampled_from(["a", "b", "c", "d", "e", "bad"]), min_size=1,
                         max_size=6), min_size=1, max_size=5))
def test_grouped_posts_count_every_record_once(posts):
    """However records are split over POSTs sent at once (the same run in several of them,
    bad lines anywhere), the POSTs' own summaries add up to one ingest of them all: each
    distinct run accepted once, every other copy a duplicate, each bad line a reject of the
    POST it was in; and the store holds each distinct run once."""
    bodies = [b"".join(BAD_LINE + b"\n" if r == "bad" else _line(r) for r in post)
              for post in posts]
    with tempfile.TemporaryDirectory() as tmp:
        store = ServedStore(Path(tmp) / "p.duckdb")
        try:
            answers = _hold_writer_while(store, bodies, Path(tmp))
            with store.reader() as cur:
                runs = sorted(row[0] for row in cur.execute("SELECT run_id FROM runs").fetchall())
        finally:
            store.close()
    valid = [r for post in posts for r in post if r != "bad"]
    assert runs == sorted(set(valid))
    assert sum(a["accepted"] for a in answers) == len(set(valid))
    assert sum(a["duplicate"] for a in answers) == len(valid) - len(set(valid))
    for post, answer in zip(posts, answers, strict=True):
        assert answer["rejected"] == post.count("bad")
        assert answer["accepted"] + answer["duplicate"] == len(post) - post.count("bad")
        assert set(answer["run_keys"]) <= {f"aioc:{r}" for r in post}


def test_a_failed_group_answers_every_post_with_the_error(tmp_path):
    """If storing a group fails (here: the store file is not a store), every POST in it is
    answered with the error and none waits for ever; the next POST, once the file is a store
    again, is stored."""
    db = tmp_path / "broken.duckdb"
    db.write_bytes(b"this is not a DuckDB file" * 100)
    store = ServedStore(db)
    try:
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(ingest_body, store, tmp_path, _line(run_id),
                                   "application/x-ndjson", False) for run_id in ("x", "y")]
            errors = [future.exception(timeout=120) for future in futures]
        assert all(error is not None for error in errors), errors
        db.unlink()
        assert ingest_body(store, tmp_path, _line("z"), "application/x-ndjson",
                           False)["accepted"] == 1
    finally:
        store.close()


def test_a_read_gets_in_while_posts_keep_coming(tmp_path):
    """Two senders POST without pause, so a batch always has a POST waiting to join the next;
    a read that comes meanwhile still gets in (the session of writes ends for it) long before
    the senders run out of POSTs, and sees what was answered before it began."""
    store = ServedStore(tmp_path / "busy.duckdb")
    limit = 1000  # the senders stop once the read is in: a high bound costs a passing run nothing
    stop = threading.Event()
    answered: list[str] = []

    def send(sender: int) -> None:
        for n in range(limit):
            if stop.is_set():
                return
            run_id = f"s{sender}-{n}"
            ingest_body(store, tmp_path, _line(run_id), "application/x-ndjson", False)
            answered.append(run_id)

    try:
        with ThreadPoolExecutor(2) as pool:
            senders = [pool.submit(send, sender) for sender in (0, 1)]
            _wait_until(lambda: len(answered) >= 10)
            before = set(answered)
            with store.reader() as cur:
                seen = {row[0] for row in cur.execute("SELECT run_id FROM runs").fetchall()}
            sent_when_read = len(answered)
            stop.set()
            for sender in senders:
                sender.result(timeout=300)
    finally:
        store.close()
    assert before <= seen
    assert sent_when_read < 2 * limit
