"""Attention Playground: `python app.py` serves the web UI on GRADIO_SERVER_NAME:GRADIO_SERVER_PORT (7860)."""

import asyncio
import logging
import os
import signal
import sys

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from playground.settings import apply_process_defaults  # noqa: E402 (imports no torch)

apply_process_defaults()  # before torch loads OpenMP and oneDNN


def main() -> None:
    from playground.budget import fix_heap
    from playground.ui import build_app, launch_options

    fix_heap()  # large blocks mmapped and given back when freed: a request's peak the same in every process
    from playground.server.logs import CappedLines

    sys.stderr = CappedLines(sys.stderr)  # before logging takes it: no log line longer than MAX_LOG_LINE
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = build_app()
    # As PID 1 in a container, SIGTERM (docker stop) has no default action: make it stop the server like Ctrl-C.
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda _number, _frame: stop_serving(app))
    try:
        app.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                   server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
                   **launch_options(app.playground_context.limits, app.playground_context.uploads))
    except KeyboardInterrupt:
        pass  # stopped before launch's own wait began; that wait catches it and returns
    finally:
        shut_down(app)
    leave()  # launch returns only once the server was stopped (Ctrl-C, SIGTERM)


def leave() -> None:
    """End the process now that the run is saved and the server closed, without the interpreter's teardown.

    A visitor's request that the server stopped answering (a long sample, a sweep) may still be inside torch in one
    of Gradio's worker threads; tearing the interpreter down under it aborted the process now and then ("terminate
    called without an active exception", exit -6, a fresh-clone CI's SIGTERM test). Nothing is left to save, and this
    app registers no exit handlers: the logs are flushed and the process exits with 0.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)


def stop_serving(app) -> None:
    """Ctrl-C or SIGTERM: stop answering at once, then (``shut_down``) save the training run.

    uvicorn waits, without end, for every response still open before it stops (a visitor's event stream stays
    open while a long sample or sweep runs), and Gradio gives it 5 s, twice (launch's Ctrl-C, then close): a
    server with one page open took 10 to 11 s to exit, past docker stop's 10 s. ``force_exit`` is what uvicorn's
    own second Ctrl-C sets: the open responses are dropped, not waited for.
    """
    server = getattr(app, "server", None)
    if server is not None:
        server.force_exit = True
        logging.getLogger("uvicorn.error").addFilter(_not_cancelled)  # a dropped response is no error
    raise KeyboardInterrupt


def _not_cancelled(record: logging.LogRecord) -> bool:
    """False for the tracebacks of what uvicorn cancels as it exits (each open response, its lifespan task)."""
    if record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError):
        return False
    return not str(record.msg).rstrip().endswith("CancelledError")  # the lifespan's, sent as text


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
