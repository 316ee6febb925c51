# avatar-server: CPU by default; the compose file's gpu profile runs the same image on NVIDIA GPUs,
# its ray profile an image built with EXTRAS=ray.
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY server server
COPY engine engine
COPY media media
COPY speech speech
COPY avatar_client avatar_client
COPY assets assets
COPY static static
COPY web web
# EXTRAS=ray for the compose file's ray profile (Ray head, workers and front end)
ARG EXTRAS=""
RUN pip install --no-cache-dir ".${EXTRAS:+[$EXTRAS]}"

# Import the code from /app, beside assets/, static/ and engine/weights/ (not site-packages, which has no data files)
ENV PYTHONPATH=/app AVATAR_HOST=0.0.0.0 AVATAR_PORT=8080 AVATAR_AVATARS_DIR=/data/avatars
EXPOSE 8080
VOLUME /data
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz')"
USER nobody
CMD ["avatar-server"]
