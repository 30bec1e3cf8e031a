# Image for every nki-grader service (web, workers, beat). BASE_IMAGE: python:3.11-slim for the
# simulator; an image with the Neuron SDK for the Trn2 worker (docker-compose.yml sets both).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
WORKDIR /app
COPY pyproject.toml README.md ./
COPY nkisim nkisim
COPY grader grader
COPY store store
COPY workers workers
COPY web web
COPY service service
COPY reference_kernels reference_kernels
COPY student_template student_template
RUN pip install --no-cache-dir .
# The current Neuron SDK line (nki 0.2+) runs NEFFs in a separate nrtpy environment: the nrtpy and
# nki wheels cannot share one (docs/trainium.md). Built only when NRTPY_VENV names its folder.
ARG NRTPY_VENV=""
RUN if [ -n "$NRTPY_VENV" ]; then python3 -m venv "$NRTPY_VENV" && "$NRTPY_VENV/bin/pip" install --no-cache-dir \
      numpy nrtpy --extra-index-url=https://pip.repos.neuron.amazonaws.com; fi
ENV NKI_GRADER_HOME=/data PYTHONUNBUFFERED=1
VOLUME /data
EXPOSE 8000
# docker-compose.yml gives each service its own command (docs/operators.md, "Deployment with Docker
# Compose"); this default serves everything in one container, its site on the container's own
# 127.0.0.1 (`docker run --network host`), its databases in /data
CMD ["grader", "serve", "--port", "8000"]
