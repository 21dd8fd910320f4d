"""Dask's dashboard for the cluster a job starts: attached to its scheduler's HTTP server at the
first visit to one of its pages, not as the cluster starts.

Takes a LocalCluster whose scheduler serves HTTP without the dashboard (``dashboard=False``); gives
that server a page for every path its own routes leave unanswered, which attaches the dashboard
(importing bokeh, on a thread of its own) and sends the browser back to the same address, which the
dashboard then answers. Importing bokeh takes a second or more of processor time under the GIL, which
a cluster of threads shares with its tasks: a job nobody watches never pays for it, and its link
answers from the start all the same (the first page a second or two late). Until then the
scheduler's own JSON routes (``/sitemap.json``, ``/individual-plots.json``) know no dashboard pages.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Awaitable, Callable

from distributed import LocalCluster
from tornado import web
from tornado.httputil import HTTPServerRequest

log = logging.getLogger(__name__)
DASHBOARD = "distributed.dashboard.scheduler"  # its import is bokeh's


def attach_on_first_visit(cluster: LocalCluster) -> None:
    """Serve ``cluster``'s dashboard from the first visit to one of its pages on."""
    scheduler = cluster.scheduler
    # distributed's RoutingApplication asks its applications in turn for a page its own routes do not
    # have: this one, until the dashboard is attached, then the dashboard's.
    scheduler.http_application.add_application(_DashboardOnFirstVisit(scheduler))


class _DashboardOnFirstVisit(web.Application):
    """Every path, until the dashboard is attached (or could not be): then none."""

    def __init__(self, scheduler: object) -> None:
        super().__init__([(r".*", _AttachDashboard, {"attach": self.attach})])
        self.scheduler = scheduler
        self.done = False
        self._attaching: asyncio.Task | None = None

    def find_handler(self, request: HTTPServerRequest, **kwargs: object) -> object:
        return None if self.done else super().find_handler(request, **kwargs)

    async def attach(self) -> None:
        """Attach the dashboard, once, however many visits wait for it."""
        if self._attaching is None:
            self._attaching = asyncio.ensure_future(self._attach())
        await asyncio.shield(self._attaching)

    async def _attach(self) -> None:
        try:
            # The import is most of the work: on a thread, so that the scheduler goes on meanwhile.
            loop = asyncio.get_running_loop()
            dashboard = await loop.run_in_executor(None, importlib.import_module, DASHBOARD)
            scheduler = self.scheduler
            dashboard.connect(scheduler.http_application, scheduler.http_server, scheduler)
        except Exception:  # only ever a view of the job
            log.warning("could not start Dask's dashboard", exc_info=True)
        finally:
            self.done = True


class _AttachDashboard(web.RequestHandler):
    def initialize(self, attach: Callable[[], Awaitable[None]]) -> None:
        self.attach = attach

    async def get(self) -> None:
        await self.attach()
        # Now the dashboard's page (or a 404, if it did not start); a path of this server's only, so
        # that //elsewhere/ sends no browser to another site.
        self.redirect("/" + self.request.uri.lstrip("/\\"))

    head = get
