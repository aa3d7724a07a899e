"""The web console: server-rendered pages under /ui/ on the coordinator's falcon app
(Jinja2 with autoescaping, static CSS/JS, sessions from a token sign-in). See docs/console.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.console import backfills, cursors, lifecycle, rerun, runlist, tokens
from service.console import pages as p
from service.console.web import (
    PREFIX,
    Console,
    ConsoleError,
    ConsoleMiddleware,
    ConsoleSettings,
    console_error_handler,
)

if TYPE_CHECKING:
    import falcon

    from service.domain.deps import Deps

__all__ = ["PREFIX", "ConsoleSettings", "add_console"]


def add_console(app: falcon.App, deps: Deps, settings: ConsoleSettings) -> None:
    """Register the console's middleware, routes and HTML error page on `app`."""
    console = Console(deps, settings)
    app.add_middleware(ConsoleMiddleware(console))
    app.add_error_handler(ConsoleError, console_error_handler(console))
    pipeline = f"{PREFIX}/pipelines/{{pipeline_id:uuid}}"
    run = f"{PREFIX}/runs/{{run_id:uuid}}"
    app.add_route(PREFIX, p.PipelinesPage(console))
    app.add_route(f"{PREFIX}/static/{{name}}", p.StaticFile(console))
    app.add_route(f"{PREFIX}/login", p.LoginPage(console))
    app.add_route(f"{PREFIX}/logout", p.LogoutAction(console))
    app.add_route(pipeline, p.PipelinePage(console))
    app.add_route(f"{pipeline}/trigger", p.TriggerAction(console))
    app.add_route(f"{pipeline}/schedules", p.ScheduleAddAction(console))
    app.add_route(f"{pipeline}/preview", p.PreviewAction(console))
    app.add_route(
        f"{pipeline}/schedules/{{schedule_id:uuid}}/delete", p.ScheduleDeleteAction(console)
    )
    app.add_route(f"{pipeline}/cursors/set", cursors.CursorSetAction(console))
    app.add_route(f"{pipeline}/cursors/reset", cursors.CursorResetAction(console))
    app.add_route(f"{pipeline}/pause", lifecycle.PauseAction(console))
    app.add_route(f"{pipeline}/unpause", lifecycle.UnpauseAction(console))
    app.add_route(f"{pipeline}/delete", lifecycle.DeletePage(console))
    app.add_route(f"{pipeline}/backfills", backfills.BackfillsPage(console))
    app.add_route(f"{PREFIX}/backfills/{{backfill_id:uuid}}", backfills.BackfillPage(console))
    app.add_route(
        f"{PREFIX}/backfills/{{backfill_id:uuid}}/cancel", backfills.BackfillCancelAction(console)
    )
    app.add_route(f"{PREFIX}/runs", runlist.RunsPage(console))
    app.add_route(run, p.RunPage(console))
    app.add_route(f"{run}/cancel", p.CancelAction(console))
    app.add_route(f"{run}/resume", p.ResumeAction(console))
    app.add_route(f"{run}/rerun", rerun.RerunAction(console))
    app.add_route(f"{PREFIX}/audit", p.AuditPage(console))
    app.add_route(f"{PREFIX}/tokens", tokens.TokensPage(console))
    app.add_route(f"{PREFIX}/tokens/{{token_id:uuid}}/rotate", tokens.TokenRotateAction(console))
    app.add_route(f"{PREFIX}/tokens/{{token_id:uuid}}/revoke", tokens.TokenRevokeAction(console))
