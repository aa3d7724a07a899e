"""What a process hands `actors.lineage.start_lineage`: where its step datasets live (the
configured directories and sandbox) and the environment the client's namespace is read
from (`OPENLINEAGE_NAMESPACE`, the OpenLineage convention beside the client's own
variables)."""

from __future__ import annotations

import os
from typing import Any

from actors.lineage import Places, sandbox_of
from service.config import Config


def lineage_places(cfg: Config) -> dict[str, Any]:
    """`start_lineage` keywords for a process of `cfg`."""
    places = Places(
        data_dir=cfg.data_dir,
        export_dir=cfg.export_dir,
        reject_dir=cfg.reject_dir,
        sandbox=sandbox_of(cfg.sandbox_url),
    )
    return {"places": places, "environ": os.environ}
