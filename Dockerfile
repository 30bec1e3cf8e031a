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
COPY reference_kernels reference_kernels
COPY student_template student_template
RUN pip install --no-cache-dir .
ENV NKI_GRADER_HOME=/data PYTHONUNBUFFERED=1
VOLUME /data
EXPOSE 8000
CMD ["grader", "serve", "--port", "8000"]
