"""ops.verdict.notify without a server: `--notify` URLs validated and sorted into Prefect blocks, the automation's trigger
(failed runs of the nightly deployment) and actions (the saved blocks), the webhook's JSON payload rendered as the
server renders it, and the Failed message that the payload carries. The flow's event reaching a webhook through a
served deployment is tests/ops/test_serve.py's."""

import json
import uuid

import pytest

from ops.verdict import notify
from ops.verdict.artifacts import failure_message, verdict_line
from weakspot.errors import ConfigError

HOOK = "http://127.0.0.1:8123/hook"
SLACK = "https://hooks.slack.com/services/T000/B000/XXXX"
TEAMS = (
    "https://prod-01.westeurope.logic.azure.com:443/workflows/abc/triggers/manual/paths/invoke"
    "?api-version=2016-06-01&sig=s"
)


@pytest.mark.parametrize(
    "url, kind",
    [
        (HOOK, "webhook"),
        ("https://ci.example.org/x?token=1", "webhook"),
        (SLACK, "slack"),
        ("slack://T000/B000/XXXX", "slack"),
        (TEAMS, "teams"),
    ],
)
def test_notify_urls_are_sorted_into_blocks(url, kind):
    assert notify.check_url(url) == kind
    block = notify.make_block(url)
    assert block.url.get_secret_value() == url
    assert (
        type(block).__name__ == {"webhook": "Webhook", "slack": "SlackWebhook", "teams": "MicrosoftTeamsWebhook"}[kind]
    )
    if kind == "webhook":
        assert block.method == "POST" and block.headers.get_secret_value()["Content-Type"] == "application/json"
    assert "XXXX" not in notify.describe(url) and "token" not in notify.describe(url)  # secrets not printed


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "127.0.0.1:8000/hook",
        "hooks.slack.com/services/x",
        "ftp://host/x",
        "http://",
        "mailto:a@b.c",
        "http://exa mple.org/x",
    ],
)
def test_bad_notify_values_are_named(bad):
    with pytest.raises(ConfigError, match="--notify .*not a URL to post to.*http"):
        notify.check_url(bad)


def test_serve_refuses_a_bad_notify_before_starting_anything(capsys, tmp_path, monkeypatch):
    from ops.cli import main

    monkeypatch.chdir(tmp_path)  # not even a repository: the URL is checked first
    assert main(["serve", "--notify", HOOK, "--notify", "not-a-url"]) == 2
    assert "--notify 'not-a-url': not a URL to post to" in capsys.readouterr().err


def test_the_automation_fires_on_failed_runs_of_the_nightly_deployment():
    ids = [uuid.uuid4(), uuid.uuid4()]
    a = notify.build_automation("weakspot-nightly", [("webhook", ids[0]), ("slack", ids[1])])
    assert a.name == "weakspot-notify-weakspot-nightly" and a.enabled
    t = a.trigger
    assert t.type == "event" and t.posture == "Reactive" and t.threshold == 1
    assert t.expect == {"weakspot.audit.failed", "prefect.flow-run.Crashed", "prefect.flow-run.TimedOut"}
    assert [(x.type, x.block_document_id) for x in a.actions] == [
        ("call-webhook", ids[0]),
        ("send-notification", ids[1]),
    ]
    assert a.actions[0].payload == notify.PAYLOAD and "flow_run.state.message" in a.actions[1].body
    # as the server takes it (its own schema validates the templates) and matches events with it
    from prefect.server.events.schemas.automations import AutomationCore
    from prefect.server.events.schemas.events import ReceivedEvent

    trigger = AutomationCore.model_validate(a.model_dump(mode="json")).trigger

    def event(name, deployment="weakspot-nightly", flow="nightly-audit"):
        return ReceivedEvent.model_validate(
            {
                "occurred": "2026-01-01T02:00:00Z",
                "event": name,
                "resource": {"prefect.resource.id": f"prefect.flow-run.{uuid.uuid4()}", "prefect.resource.name": "r"},
                "related": [
                    {
                        "prefect.resource.id": f"prefect.flow.{uuid.uuid4()}",
                        "prefect.resource.role": "flow",
                        "prefect.resource.name": flow,
                    },
                    {
                        "prefect.resource.id": f"prefect.deployment.{uuid.uuid4()}",
                        "prefect.resource.role": "deployment",
                        "prefect.resource.name": deployment,
                    },
                ],
                "id": str(uuid.uuid4()),
            }
        )

    failed = (
        "weakspot.audit.failed"  # what the nightly flow emits when it ends Failed (ops.verdict.notify.announce_failure)
    )
    assert trigger.covers(event(failed)) and trigger.covers(event("prefect.flow-run.Crashed"))
    assert not trigger.covers(event("prefect.flow-run.Completed"))
    assert not trigger.covers(event("prefect.flow-run.Running"))
    assert not trigger.covers(event("prefect.flow-run.Failed"))  # announced by the flow already: not twice
    assert not trigger.covers(event(failed, deployment="other")) and not trigger.covers(event(failed, flow="x"))


def test_the_webhook_payload_renders_to_json_with_the_state_message():
    from prefect.server.events.actions import JinjaTemplateAction
    from prefect.server.utilities.user_templates import render_user_template_sync

    JinjaTemplateAction._register_filters_if_needed()  # ui_url, as the server registers it
    msg = 'weakspot audit FAILED: gate x >= 1.01: "x" = 0.8\nReport: /r/reports/index.html'
    ctx = {
        "flow_run": {"name": "clever-fox", "id": "f1", "state": {"name": "Failed", "message": msg}},
        "deployment": {"name": "weakspot-nightly"},
        "flow": {"name": "nightly-audit"},
        "event": {"event": "weakspot.audit.failed"},
    }
    body = json.loads(render_user_template_sync(notify.PAYLOAD, ctx))
    assert body["message"] == msg and body["state"] == "Failed" and body["deployment"] == "weakspot-nightly"
    assert body["text"] == f"weakspot nightly audit clever-fox (deployment weakspot-nightly) Failed: {msg}"


def test_the_failed_message_names_regressions_and_gates_and_the_report():
    comp = {
        "previous": "P",
        "rows": [{"metric": "train/d:acc", "before": 0.9, "after": 0.8, "rule": "down 0.01", "regression": True}],
        "gates": [
            {
                "condition": "train/d:acc >= 1.01",
                "kind": "gate",
                "passed": False,
                "numbers": "1 of 1 fail: train/d:acc = 0.8",
            },
            {"condition": "ok", "kind": "gate", "passed": True, "numbers": ""},
        ],
    }
    assert verdict_line(comp) == "1 regression since audit P; 1 failed gate"
    m = failure_message(comp, "/r/reports/index.html", "/r/reports/summary.md")
    assert m.startswith("weakspot audit FAILED: 1 regression since audit P; 1 failed gate: ")
    assert "train/d:acc 0.9 -> 0.8 (down 0.01)" in m and "gate train/d:acc >= 1.01: 1 of 1 fail" in m
    assert m.endswith("Report: /r/reports/index.html ; summary: /r/reports/summary.md")
    first = failure_message({"previous": None, "rows": [], "gates": comp["gates"]}, "r", "s")
    assert first.startswith("weakspot audit FAILED: first audit: nothing to compare with yet; 1 failed gate: gate ")
