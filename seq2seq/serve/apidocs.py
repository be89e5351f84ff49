"""The interactive API docs (Swagger UI) at ``/docs``, served from the files of the
``swagger-ui-py`` package: the page loads with no network, where FastAPI's own
``/docs`` would fetch its viewer from a CDN (the application turns that one off).

``swagger-ui-py`` ships Swagger UI 5, which reads the OpenAPI 3.1 that FastAPI
writes; ``swagger-ui-bundle``'s Swagger UI 4.15 refuses it ("does not specify a
valid version field"). Only the package's files are used, not its glue code.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from starlette.exceptions import HTTPException

DOCS = "/docs"
# the viewer's files: a name, not a path, so no request can name another file
FILES = {
    "swagger-ui-bundle.js": "application/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}


def add_api_docs(app: FastAPI, title: str) -> None:
    """``/docs`` (the page) and ``/docs/<file>`` (its script, style and icon) on
    ``app``, none of them in the schema."""
    folder = Path(str(resources.files("swagger_ui").joinpath("static")))

    @app.get(DOCS, include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{title}: API",
            swagger_js_url=f"{root}{DOCS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS}/favicon-32x32.png",
            # no validator badge: Swagger UI would ask validator.swagger.io
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get(DOCS + "/{name}", include_in_schema=False)
    async def docs_file(name: str) -> FileResponse:
        if name not in FILES:
            raise HTTPException(404, f"no such file: {name}")
        return FileResponse(folder / name, media_type=FILES[name])
