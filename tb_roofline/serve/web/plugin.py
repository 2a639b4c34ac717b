"""The TensorBoard plugin: the Roofline tab, mounting the route table of `serve/web/routes.py`."""

from __future__ import annotations

from tensorboard.plugins import base_plugin

from tb_roofline.serve.service.core import RooflineService
from tb_roofline.serve.web.routes import RooflineRoutes

PLUGIN_NAME = "roofline"


class RooflinePlugin(base_plugin.TBPlugin):
    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext):
        from tb_roofline.serve.service.progress import LoggedProgress

        self._service = RooflineService(context.logdir or "", progress=LoggedProgress())
        self._routes = RooflineRoutes(self._service)

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(
            es_module_path="/index.js", tab_name="Roofline", disable_reload=False
        )

    def is_active(self):
        """Instant: answers from the last background scan, never walks the logdir here."""
        return self._service.has_profiles()

    def get_plugin_apps(self):
        return self._routes.table()
