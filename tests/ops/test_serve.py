"""`weakspot serve`, tried as a new user would: serve the nightly audit on a one-minute cron, let the schedule fire
once, and read the Prefect server's record of it (the run, its deployment and schedule, the verdict artifacts, the
UI page)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.ops  # on the shared ops_repo

CRON = "* * * * *"
DONE = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")


def _free_port() -> int:
    from tasks.server import free_port

    return free_port(None)  # outside the ports of outgoing connections


def _api(base: str, path: str, body=None, method=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        base + path,
        data=data,
        method=method or ("POST" if data is not None else "GET"),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=15) as r:
        text = r.read()
    return json.loads(text) if text else None


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _start_serve(ops_repo, tmp_path, port: int, *extra: str):
    """`weakspot serve --cron CRON --port PORT EXTRA...` in ops_repo (its own local server); the process and its log."""
    # The server's scheduler creates a new deployment's runs within seconds (its recent-deployments loop); the
    # runner polls for due runs every 10 s by default: 2 s here, so the run starts close to the minute.
    env = {**ops_repo.env, "PREFECT_RUNNER_POLL_FREQUENCY": "2"}
    env.pop("PREFECT_API_URL", None)
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ops.cli", "serve", "--cron", CRON, "--port", str(port), *extra],
            cwd=ops_repo.path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc, log_path


def _first_scheduled_run(base: str, proc, log_path, timeout: float = 240):
    """The first run of the deployment since now once it has ended (None after ``timeout``), and the deployment (an
    earlier test's runs stay in ops_repo's database)."""
    from datetime import datetime, timezone

    run, paused, deployment = None, False, None
    deadline = time.time() + timeout
    since = datetime.now(timezone.utc).isoformat()
    while time.time() < deadline:
        assert proc.poll() is None, f"weakspot serve exited ({proc.returncode}):\n{log_path.read_text()[-3000:]}"
        try:
            runs = _api(
                base,
                "/api/flow_runs/filter",
                {
                    "deployments": {"name": {"any_": ["weakspot-nightly"]}},
                    "sort": "EXPECTED_START_TIME_ASC",
                    "flow_runs": {"expected_start_time": {"after_": since}},
                },
            )
        except (OSError, ValueError):
            runs = []
        started = [r for r in runs if r["state_type"] not in ("SCHEDULED",)]
        if started and not paused:
            # one run is enough: pause the schedule (deletes the next minutes' runs) so that no second audit
            # starts in the shared ops_repo while this test reads the first one
            deployment = _api(base, f"/api/deployments/{started[0]['deployment_id']}")
            _api(base, f"/api/deployments/{deployment['id']}/pause_deployment", {}, method="POST")
            paused = True
        if started and started[0]["state_type"] in DONE:
            run = started[0]
            break
        time.sleep(2)
    return run, deployment


def _stop_serve(proc) -> int:
    """Ctrl-C, as a user stops it: serving stops, the schedule stays paused, the server is stopped; the exit code."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        import psutil  # the serving process and the server have process groups of their own

        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError("weakspot serve did not stop on Ctrl-C within 60 s")


def _forget_audits(hist, before) -> None:
    """Put ops_repo's history back as it was (the report stage reruns at the next audit)."""
    for audit in {p.stem for p in hist.glob("*.parquet")} - before:
        for f in hist.glob(f"{audit}.*"):
            f.unlink()


def test_serve_fires_on_cron_and_publishes_the_verdict(ops_repo, tmp_path):
    hist = ops_repo.path / "history"
    before = {p.stem for p in hist.glob("*.parquet")}
    assert before, "ops_repo has been audited once"
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    t0, fired = time.time(), float("nan")
    proc, log_path = _start_serve(ops_repo, tmp_path, port)
    try:
        run, deployment = _first_scheduled_run(base, proc, log_path)
        fired = time.time() - t0
        out = log_path.read_text()
        assert run is not None, f"no scheduled run finished within 4 minutes:\n{out[-4000:]}"
        assert run["state_type"] == "COMPLETED", f"{run['state_name']}: {run['state']['message']}\n{out[-4000:]}"
        # created by the cron schedule, not by hand
        assert run["auto_scheduled"] is True and run["idempotency_key"].startswith("scheduled ")
        assert deployment["name"] == "weakspot-nightly"
        assert [s["schedule"].get("cron") for s in deployment["schedules"]] == [CRON]
        assert _api(base, f"/api/flows/{run['flow_id']}")["name"] == "nightly-audit"
        assert f"Prefect UI: {base}" in out, out[:2000]

        # the history store gained the audit, compared with the previous one: nothing changed, no regressions
        new = {p.stem for p in hist.glob("*.parquet")} - before
        assert new, "the scheduled audit recorded nothing in history/"
        arts = {
            a["key"]: a
            for a in _api(base, "/api/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [run["id"]]}}})
        }
        assert {"weakspot-verdict", "weakspot-comparison"} <= set(arts), sorted(arts)
        md = arts["weakspot-verdict"]["data"]
        assert arts["weakspot-verdict"]["type"] == "markdown"
        assert f"no regressions since audit {max(before)}" in md, md
        assert any(a in md for a in new) and "reports/index.html" in md, md
        rows = json.loads(arts["weakspot-comparison"]["data"])
        assert arts["weakspot-comparison"]["type"] == "table"
        assert rows and not any(r["regression"] for r in rows), rows
        assert any(r["metric"].startswith("train/phoneme:") for r in rows), rows
        assert "Report: " in out and "index.html" in out

        # the UI's page for the run, as a browser asks for it, and the UI calls this server's API (not 4200's)
        page = urllib.request.Request(f"{base}/runs/flow-run/{run['id']}", headers={"Accept": "text/html"})
        with urllib.request.urlopen(page, timeout=15) as r:
            assert r.status == 200 and b"<html" in r.read().lower()
        assert _api(base, "/ui-settings")["api_url"] == f"{base}/api"
    finally:
        rc = _stop_serve(proc)
        print(
            f"first scheduled run finished {fired:.0f} s after `weakspot serve` started; total {time.time() - t0:.0f} s"
        )
        _forget_audits(hist, before)
    assert rc == 130, rc
    time.sleep(1)
    assert not _port_open(port), "the Prefect server outlived weakspot serve"


class _Receiver:
    """A local webhook receiver: an HTTP server in a thread on 127.0.0.1 that records every POST (path, headers,
    body)."""

    def __init__(self):
        import http.server
        import threading

        posts = self.posts = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                posts.append((self.path, dict(self.headers), body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, timeout: float) -> list:
        deadline = time.time() + timeout
        while not self.posts and time.time() < deadline:
            time.sleep(1)
        return self.posts


GATE = {"metric": "train/phoneme:test_accuracy", "op": ">=", "value": 1.01}  # no model reaches it: the audit exits 3


def test_a_failed_nightly_run_posts_its_verdict_to_the_notify_webhook(ops_repo, tmp_path):
    hist, params = ops_repo.path / "history", ops_repo.path / "params.yaml"
    before, original = {p.stem for p in hist.glob("*.parquet")}, params.read_text()
    receiver = _Receiver()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    ops_repo.set_params(gates={"fail": True, "conditions": [GATE]})
    t0, fired, posted = time.time(), float("nan"), float("nan")
    proc, log_path = _start_serve(ops_repo, tmp_path, port, "--notify", receiver.url)
    try:
        run, _ = _first_scheduled_run(base, proc, log_path)
        fired = time.time() - t0
        out = log_path.read_text()
        assert run is not None, f"no scheduled run finished within 4 minutes:\n{out[-4000:]}"
        assert run["auto_scheduled"] is True  # fired by the cron
        assert run["state_name"] == "Failed", f"{run['state_name']}: {run['state']['message']}\n{out[-4000:]}"
        gate = "gate train/phoneme:test_accuracy >= 1.01: 1 of 1 fail: train/phoneme:test_accuracy = "
        assert gate in run["state"]["message"], run["state"]["message"]
        autos = _api(base, "/api/automations/filter", {})
        assert [a["name"] for a in autos] == ["weakspot-notify-weakspot-nightly"], autos  # one, however often served
        assert "127.0.0.1 (webhook)" in out and "weakspot-notify-weakspot-nightly" in out, out[:3000]

        posts = receiver.wait(90)
        posted = time.time() - t0
        assert posts, f"the webhook received nothing within 90 s of the run's end\n{out[-3000:]}"
        path, headers, raw = posts[0]
        body = json.loads(raw)
        assert path == "/hook" and headers["Content-Type"] == "application/json"
        assert body["state"] == "Failed" and body["flow_run"] == run["name"] and body["flow_run_id"] == run["id"]
        assert body["deployment"] == "weakspot-nightly" and body["event"] == "weakspot.audit.failed"
        msg = body["message"]
        assert msg == run["state"]["message"] and msg.startswith("weakspot audit FAILED: ")
        assert f"no regressions since audit {max(before)}; 1 failed gate: {gate}" in msg, msg
        assert f"Report: {ops_repo.path / 'reports/index.html'}" in msg and "reports/summary.md" in msg, msg
        assert body["text"].startswith(
            f"weakspot nightly audit {run['name']} (deployment weakspot-nightly) Failed: weakspot audit FAILED"
        )
        assert body["ui_url"] == f"{base}/runs/flow-run/{run['id']}"
        time.sleep(5)
        assert len(posts) == 1, posts  # once
    finally:
        rc = _stop_serve(proc)
        receiver.server.shutdown()
        print(
            f"the failed run ended {fired:.0f} s and the webhook got it {posted:.0f} s after `weakspot serve` "
            f"started; total {time.time() - t0:.0f} s"
        )
        params.write_text(original)
        _forget_audits(hist, before)
    assert rc == 130, rc
    assert "automation weakspot-notify-weakspot-nightly removed" in log_path.read_text()


def test_a_malformed_cron_is_named_before_anything_is_served(capsys):
    """Checked by Prefect's public schedule model (issue 48: no ``prefect._internal``), before a server is asked."""
    from ops.engine.nightly import serve

    for bad in ("61 2 * * *", "0 2 * *x", "every night"):
        assert serve(bad) == 2
        assert f'Invalid cron string: "{bad}"' in capsys.readouterr().err
