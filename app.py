"""Attention Playground: `python app.py` serves the web UI on GRADIO_SERVER_NAME:GRADIO_SERVER_PORT (7860)."""

import logging
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def main() -> None:
    from playground.ui import build_app, launch_options

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = build_app()
    app.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
               server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
               **launch_options(app.playground_context.limits))


if __name__ == "__main__":
    main()
