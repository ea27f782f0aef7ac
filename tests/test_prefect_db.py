"""The tests' prepared Prefect database (tests/prefect_db.py): copied into a new PREFECT_HOME only, saved once, never used for
another database than Prefect's default SQLite file."""

import sqlite3

import prefect_db


def _db(path, rows):
    with sqlite3.connect(path) as c:
        c.execute("create table t (x int)")
        c.executemany("insert into t values (?)", [(r,) for r in rows])


def _rows(path):
    with sqlite3.connect(path) as c:
        return [r[0] for r in c.execute("select x from t order by x")]


def test_kept_once_then_seeded_into_a_new_home_only(tmp_path):
    env = {"WEAKSPOT_CACHE": str(tmp_path / "cache")}
    first, second, third = (tmp_path / n for n in ("a", "b", "c"))
    for h in (first, second, third):
        h.mkdir()
    _db(first / "prefect.db", [1, 2])
    prefect_db.keep(first, env)
    tpl = prefect_db.template(env)
    assert tpl.name.startswith("prefect-") and _rows(tpl) == [1, 2]
    _db(second / "prefect.db", [7])
    prefect_db.keep(second, env)  # one exists: not replaced
    assert _rows(tpl) == [1, 2]
    assert prefect_db.seed(third, env) and _rows(third / "prefect.db") == [1, 2]
    assert not prefect_db.seed(second, env) and _rows(second / "prefect.db") == [7]  # an existing database is kept
    assert not [p for p in third.iterdir() if p.name.startswith(".prefect.db.")]  # no temporary file left


def test_another_database_url_is_left_alone(tmp_path):
    env = {"WEAKSPOT_CACHE": str(tmp_path), "PREFECT_API_DATABASE_CONNECTION_URL": "postgresql+asyncpg://x/y"}
    assert prefect_db.database(tmp_path, env) is None
    _db(tmp_path / "prefect.db", [1])
    prefect_db.keep(tmp_path, env)
    assert not prefect_db.template(env).exists()
    assert not prefect_db.seed(tmp_path / "new", env)


def test_a_journal_left_by_a_deleted_database_stops_the_copy(tmp_path):
    env = {"WEAKSPOT_CACHE": str(tmp_path / "cache")}
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    _db(first / "prefect.db", [1])
    prefect_db.keep(first, env)
    (second / "prefect.db-wal").write_bytes(b"stale")
    assert not prefect_db.seed(second, env) and not (second / "prefect.db").exists()
