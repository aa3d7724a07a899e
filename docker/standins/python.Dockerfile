# A local stand-in for `python:3.11-slim`, for machines that reach Debian's packages and PyPI
# but no container registry (built by `etl drill compose`, see docs/compose.md). It keeps the
# interface the project's Dockerfile uses: `python` and `pip` on PATH, `pip install` allowed
# system-wide, groupadd/useradd, a C.UTF-8 locale. Base: a debootstrapped Debian (bookworm,
# whose python3 is 3.11), imported as etl-standin-base:bookworm.
FROM etl-standin-base:bookworm

ENV LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive

# ca.crt: the build machine's CA bundle, so that pip trusts what that machine trusts.
COPY ca.crt /usr/local/share/ca-certificates/etl-standin-host.crt
RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends python3 python3-pip ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED \
 && ln -s /usr/bin/python3 /usr/local/bin/python \
 && ln -s /usr/bin/pip3 /usr/local/bin/pip

ENV PIP_CERT=/usr/local/share/ca-certificates/etl-standin-host.crt
LABEL org.etl-platform.standin="python:3.11-slim"
CMD ["python3"]
