# avatar-server: the wheel of this repository in a virtual environment, run as a non-root user.
#   docker build -t avatar-server .      (base: Docker Hub's python:3.11-slim-bookworm)
#   scripts/image.sh                     (no registry: a Debian base made by debootstrap, offline wheels)
# CPU torch by default; the compose file's gpu profile builds with PyPI's (CUDA) torch.
ARG BASE=python:3.11-slim-bookworm

# 1. The wheel, built from the sources and installed as a user installs it (pip, the pinned
#    dependencies); only the environment it makes goes on, not the sources or the wheel.
FROM ${BASE} AS install
ARG EXTRAS=""
ARG PIP_NO_INDEX
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
COPY . /src
RUN python3 -m venv /opt/avatar \
 && /opt/avatar/bin/pip install --no-cache-dir --find-links /src/wheels "setuptools>=77" \
 && /opt/avatar/bin/pip wheel --no-deps --no-build-isolation --no-cache-dir -w /tmp/dist /src \
 && PIP_EXTRA_INDEX_URL="$TORCH_INDEX" /opt/avatar/bin/pip install --no-cache-dir --find-links /src/wheels \
      "$(ls /tmp/dist/avatar_server-*.whl)${EXTRAS:+[$EXTRAS]}" \
 && /opt/avatar/bin/pip uninstall -y -q setuptools

# 2. The image: the base, OpenCV's system libraries, the environment.
FROM ${BASE}
RUN dpkg -s libgl1 libglib2.0-0 >/dev/null 2>&1 || (apt-get update \
      && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 && rm -rf /var/lib/apt/lists/*) \
 && useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin avatar \
 && mkdir -p /data/avatars && chown -R avatar:avatar /data
COPY --from=install /opt/avatar /opt/avatar
ENV PATH=/opt/avatar/bin:$PATH HOME=/data AVATAR_HOST=0.0.0.0 AVATAR_PORT=8080 AVATAR_AVATARS_DIR=/data/avatars
USER avatar
WORKDIR /data
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s \
  CMD python -c "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ['AVATAR_PORT'], timeout=4)"
CMD ["avatar-server"]
