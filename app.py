"""Attention Playground: `python app.py` serves the web UI on GRADIO_SERVER_NAME:GRADIO_SERVER_PORT (7860)."""

import logging
import os
import signal
import sys

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from playground.settings import apply_process_defaults  # noqa: E402 (imports no torch)

apply_process_defaults()  # before torch loads OpenMP and oneDNN


def main() -> None:
    from playground.ui import build_app, launch_options
    from playground.ui.logs import CappedLines

    sys.stderr = CappedLines(sys.stderr)  # before logging takes it: no log line longer than MAX_LOG_LINE
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # As PID 1 in a container, SIGTERM (docker stop) has no default action: make it stop the server like Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    app = build_app()
    try:
        app.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                   server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
                   **launch_options(app.playground_context.limits))
    except KeyboardInterrupt:
        pass
    finally:
        shut_down(app)


def shut_down(app, wait_seconds: float = 8.0) -> None:
    """Stop a training run so it saves its checkpoint (within docker stop's 10 s), then close the server."""
    jobs = app.playground_context.jobs
    if jobs.status().active:
        logging.getLogger(__name__).info("stopping the training run so it saves a checkpoint")
        jobs.stop()
        jobs.wait(wait_seconds)
    app.close()


if __name__ == "__main__":
    main()
