# BASE_IMAGE and TORCH_INDEX_URL default to the public image and PyTorch's CPU index; a machine without them
# (no image registry, a local wheel mirror) builds with --build-arg, as ../shared/tools/docker-smoke does.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GRADIO_ANALYTICS_ENABLED=False \
    HF_HUB_DISABLE_TELEMETRY=1 \
    GRADIO_SERVER_NAME=0.0.0.0 \
    GRADIO_SERVER_PORT=7860 \
    HOME=/home/user

RUN useradd --create-home --uid 1000 user
WORKDIR /home/user/app

# Dependencies first, in their own layer: CPU-only torch from PyTorch's index, then the rest.
COPY requirements.txt .
RUN pip install torch==2.13.0 --index-url ${TORCH_INDEX_URL} \
 && pip install -r requirements.txt

COPY --chown=user:user . .
USER user

EXPOSE 7860
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('GRADIO_SERVER_PORT', '7860') + '/', timeout=4)"

# app.py stops on SIGTERM (docker stop) by itself: it lets a training run save, then exits.
STOPSIGNAL SIGTERM
CMD ["python", "app.py"]
