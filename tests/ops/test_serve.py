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

pytestmark = [pytest.mark.slow, pytest.mark.ops]  # in the operations group of tests/run.py, on its ops_repo

CRON = "* * * * *"
DONE = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(base: str, path: str, body=None, method=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method or ("POST" if data is not None else "GET"),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=15) as r:
        text = r.read()
    return json.loads(text) if text else None


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_serve_fires_on_cron_and_publishes_the_verdict(ops_repo, tmp_path):
    hist = ops_repo.path / "history"
    before = {p.stem for p in hist.glob("*.parquet")}
    assert before, "ops_repo has been audited once"
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    # The server's scheduler creates a new deployment's runs within seconds (its recent-deployments loop); the
    # runner polls for due runs every 10 s by default: 2 s here, so the run starts close to the minute.
    env = {**ops_repo.env, "PREFECT_RUNNER_POLL_FREQUENCY": "2"}
    env.pop("PREFECT_API_URL", None)
    log_path = tmp_path / "serve.log"
    t0, fired = time.time(), float("nan")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ops.cli", "serve", "--cron", CRON,
                                 "--port", str(port)], cwd=ops_repo.path, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        run, paused, deployment = None, False, None
        deadline = time.time() + 240
        while time.time() < deadline:
            assert proc.poll() is None, f"weakspot serve exited ({proc.returncode}):\n{log_path.read_text()[-3000:]}"
            try:
                runs = _api(base, "/api/flow_runs/filter", {
                    "deployments": {"name": {"any_": ["weakspot-nightly"]}}, "sort": "EXPECTED_START_TIME_ASC"})
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
        arts = {a["key"]: a for a in _api(base, "/api/artifacts/filter",
                                          {"artifacts": {"flow_run_id": {"any_": [run["id"]]}}})}
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
        # Ctrl-C, as a user stops it: serving stops, the schedule stays paused, the server is stopped
        with_sigint = proc.poll() is None
        if with_sigint:
            os.killpg(proc.pid, signal.SIGINT)
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            import psutil  # the serving process and the server have process groups of their own

            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
            raise AssertionError("weakspot serve did not stop on Ctrl-C within 60 s")
        print(f"first scheduled run finished {fired:.0f} s after `weakspot serve` started; "
              f"total {time.time() - t0:.0f} s")
        # put ops_repo's history back as it was (the report stage reruns at the next audit)
        for audit in {p.stem for p in hist.glob("*.parquet")} - before:
            for f in hist.glob(f"{audit}.*"):
                f.unlink()
    assert rc == 130, rc
    time.sleep(1)
    assert not _port_open(port), "the Prefect server outlived weakspot serve"
