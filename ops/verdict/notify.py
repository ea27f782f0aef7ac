"""`weakspot serve --notify URL`: a Prefect automation (server-side: a trigger on the failure events of the nightly
deployment's flow runs, one action per URL) that posts when a nightly run fails or regresses.

Caveats first:

* The automation is named ``weakspot-notify-<deployment>`` and its blocks ``weakspot-notify-<deployment>-<i>``;
  :func:`install` replaces any automation of that name, so serving twice leaves one; :func:`remove` (when serving
  stops) deletes the automation and its blocks. A serve killed with SIGKILL leaves them until the next serve.
* It fires on runs of the deployment (matched by its name and the flow ``nightly-audit``, so a redeployed
  deployment keeps its notifications) that failed: the nightly flow emits ``weakspot.audit.failed`` when it ends
  Failed (a regression or a failed gate, whose message, :func:`ops.verdict.artifacts.failure_message`, holds the verdict, the
  failed conditions and where the report is; or an audit that failed after its retry), carrying the Failed state's
  name and message; Prefect's own ``Crashed`` and ``TimedOut`` state events cover runs that could not say so.
  Why not Prefect's ``prefect.flow-run.Failed`` event: a run that starts less than 5 minutes after it was scheduled
  (the first run after `weakspot serve` starts, any run of a cron every few minutes) has state events that "follow"
  a Scheduled event Prefect's scheduler never emits, and the server's triggers hold them for 15 minutes
  (PRECEDING_EVENT_LOOKBACK in prefect.server.events.ordering) before acting; a Crashed run of that kind is
  notified that late too.
* The Prefect server runs the automation: its triggers service (``PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED``, which
  also runs the actions) must be on; the local server of `weakspot serve` turns it on.
* A plain http(s) URL gets Prefect's ``Webhook`` block: a POST of a JSON object (``text``, ``state``, ``message``,
  ``flow_run``, ``deployment``, ``ui_url``...), which Slack-compatible receivers also read (``text``). A Slack
  incoming webhook (``https://hooks.slack.com/services/...`` or ``slack://...``) gets a ``SlackWebhook`` block and a
  Teams workflow URL (``https://....logic.azure.com/workflows/...``) a ``MicrosoftTeamsWebhook`` block: Prefect's
  notification blocks (apprise) post the subject and body there. URLs are secrets in the blocks; serve prints only
  their hosts.

Nothing here imports Prefect at import time: :func:`check_url` validates ``--notify`` before any server starts.
"""

from __future__ import annotations

import re
from typing import Any, List, Sequence, Tuple
from urllib.parse import urlsplit
from uuid import UUID

from weakspot.errors import ConfigError

FLOW = "nightly-audit"
#: The event the nightly flow emits when it fails (:func:`announce_failure`): a regression, a failed gate, an audit
#: that failed after its retry.
FAILED = "weakspot.audit.failed"
#: What notifies: that event, and the flow-run state events of runs the flow could not announce (a killed run, a
#: timeout). Not ``prefect.flow-run.Failed``, which would post the flow's own failures twice.
EVENTS = (FAILED, "prefect.flow-run.Crashed", "prefect.flow-run.TimedOut")
SLACK_HOSTS = ("hooks.slack.com", "hooks.slack-gov.com")

_LINE = (
    "weakspot nightly audit {{ flow_run.name }} (deployment {{ deployment.name }}) {{ flow_run.state.name }}: "
    "{{ flow_run.state.message }}"
)
SUBJECT = "weakspot nightly audit {{ flow_run.name }}: {{ flow_run.state.name }}"
BODY = _LINE + "\n{{ flow_run|ui_url }}"
#: The JSON the Webhook block posts; every value through tojson (a state message may hold quotes and newlines).
PAYLOAD = (
    '{"text": {{ ("weakspot nightly audit " ~ flow_run.name ~ " (deployment " ~ deployment.name ~ ") "'
    ' ~ flow_run.state.name ~ ": " ~ flow_run.state.message) | tojson }}, '
    '"state": {{ flow_run.state.name | string | tojson }}, '
    '"message": {{ flow_run.state.message | string | tojson }}, '
    '"flow_run": {{ flow_run.name | string | tojson }}, '
    '"flow_run_id": {{ flow_run.id | string | tojson }}, '
    '"deployment": {{ deployment.name | string | tojson }}, '
    '"flow": {{ flow.name | string | tojson }}, '
    '"event": {{ event.event | string | tojson }}, '
    '"ui_url": {{ flow_run | ui_url | tojson }}}'
)


def announce_failure(message: str) -> bool:
    """Inside a nightly flow run of a deployment: emit :data:`FAILED` for it (the run's name and id, its deployment
    and flow, ``message`` as the Failed state's message, which the automation's templates read as
    ``flow_run.state``); whether an event was emitted (not outside a deployment's run)."""
    from datetime import datetime, timezone

    from prefect.context import FlowRunContext
    from prefect.events import emit_event
    from prefect.runtime import deployment

    ctx = FlowRunContext.get()
    run = ctx.flow_run if ctx else None
    if run is None or run.deployment_id is None:
        return False
    resource = {
        "prefect.resource.id": f"prefect.flow-run.{run.id}",
        "prefect.resource.name": run.name,
        "prefect.state-message": message,
        "prefect.state-name": "Failed",
        "prefect.state-type": "FAILED",
        "prefect.state-timestamp": datetime.now(timezone.utc).isoformat(),
    }
    related = [
        {
            "prefect.resource.id": f"prefect.flow.{run.flow_id}",
            "prefect.resource.role": "flow",
            "prefect.resource.name": FLOW,
        },
        {
            "prefect.resource.id": f"prefect.deployment.{run.deployment_id}",
            "prefect.resource.role": "deployment",
            "prefect.resource.name": deployment.name or "",
        },
    ]
    return emit_event(FAILED, resource=resource, related=related) is not None


def automation_name(deployment: str) -> str:
    return f"weakspot-notify-{deployment}"


def _block_name(deployment: str, i: int) -> str:
    """A block name Prefect accepts (lowercase letters, digits and dashes)."""
    return re.sub(r"[^a-z0-9-]+", "-", f"{automation_name(deployment)}-{i}".lower()).strip("-")


def check_url(url: str) -> str:
    """The kind of ``--notify`` URL: ``"slack"``, ``"teams"`` or ``"webhook"``; a ConfigError saying what is
    accepted otherwise."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme == "slack" and parts.netloc:
        return "slack"
    if scheme in ("http", "https") and host and " " not in url.strip():
        if host in SLACK_HOSTS:
            return "slack"
        if host.endswith(".logic.azure.com") or "/powerautomate/" in parts.path:
            return "teams"
        return "webhook"
    raise ConfigError(
        f"--notify {url!r}: not a URL to post to; give an http(s) webhook (e.g. "
        "http://ci.example.org/hook, posted a JSON object), a Slack incoming webhook "
        "(https://hooks.slack.com/services/...) or a Teams workflow URL "
        "(https://....logic.azure.com/workflows/...)"
    )


def describe(url: str) -> str:
    """What the banner shows of a URL: its kind and host, not its secret path."""
    kind = check_url(url)
    return f"{urlsplit(url).hostname or urlsplit(url).netloc.split('/')[0]} ({kind})"


def make_block(url: str) -> Any:
    """The Prefect block that posts to ``url`` (not saved)."""
    kind = check_url(url)
    if kind == "slack":
        from prefect.blocks.notifications import SlackWebhook

        return SlackWebhook(url=url)
    if kind == "teams":
        from prefect.blocks.notifications import MicrosoftTeamsWebhook

        return MicrosoftTeamsWebhook(url=url)
    from prefect.blocks.webhook import Webhook

    return Webhook(url=url, method="POST", headers={"Content-Type": "application/json"})


def build_automation(deployment: str, blocks: Sequence[Tuple[str, UUID]]) -> Any:
    """The automation (a Prefect ``AutomationCore``, not created) for the deployment ``nightly-audit/<deployment>``:
    on a failed (:data:`FAILED`), Crashed or TimedOut run, one action per ``(kind, block_document_id)``: CallWebhook
    with :data:`PAYLOAD` for ``"webhook"``, SendNotification with :data:`SUBJECT` and :data:`BODY` otherwise."""
    from prefect.events.actions import CallWebhook, SendNotification
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

    trigger = EventTrigger(
        expect=set(EVENTS),
        match={"prefect.resource.id": "prefect.flow-run.*"},
        match_related=[
            {"prefect.resource.role": "deployment", "prefect.resource.name": deployment},
            {"prefect.resource.role": "flow", "prefect.resource.name": FLOW},
        ],
        posture=Posture.Reactive,
        threshold=1,
        within=0,
    )
    actions: List[Any] = [
        CallWebhook(block_document_id=bid, payload=PAYLOAD)
        if kind == "webhook"
        else SendNotification(block_document_id=bid, subject=SUBJECT, body=BODY)
        for kind, bid in blocks
    ]
    return AutomationCore(
        name=automation_name(deployment),
        enabled=True,
        trigger=trigger,
        actions=actions,
        description=f"weakspot serve --notify: a failed or regressed run of {FLOW}/{deployment} "
        "posts its state and message (the verdict, the report's path)",
    )


def remove(deployment: str) -> int:
    """Delete the automations named ``weakspot-notify-<deployment>`` and their blocks on PREFECT_API_URL's server;
    how many automations were deleted."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        found = client.read_automations_by_name(automation_name(deployment))
        for a in found:
            client.delete_automation(a.id)
        for kind in ("webhook", "slack-webhook", "ms-teams-webhook"):
            for doc in (
                client.read_block_documents_by_type(kind, include_secrets=False) if _has_type(client, kind) else []
            ):
                if doc.name and re.fullmatch(re.escape(_block_name(deployment, 0)[:-2]) + r"-\d+", doc.name):
                    try:
                        client.delete_block_document(doc.id)
                    except ObjectNotFound:
                        pass
    return len(found)


def _has_type(client: Any, slug: str) -> bool:
    from prefect.exceptions import ObjectNotFound

    try:
        client.read_block_type_by_slug(slug)
        return True
    except ObjectNotFound:
        return False


def install(deployment: str, urls: Sequence[str]) -> UUID:
    """Save one block per URL and (re)create the automation ``weakspot-notify-<deployment>`` on PREFECT_API_URL's
    server, replacing one of that name; its id."""
    from prefect.client.orchestration import get_client

    remove(deployment)
    blocks = []
    for i, url in enumerate(urls):
        block = make_block(url)
        blocks.append((check_url(url), block.save(_block_name(deployment, i), overwrite=True)))
    with get_client(sync_client=True) as client:
        return client.create_automation(build_automation(deployment, blocks))
