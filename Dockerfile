# One image for the coordinator and the executors: `etl <command>` (see docker-compose.yml).
#   docker build -t etl-platform .
#   docker run --rm etl-platform validate /app/fixtures/plans/demo.json
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

ARG ETL_UID=10001
RUN groupadd --system --gid "${ETL_UID}" etl \
 && useradd --system --uid "${ETL_UID}" --gid etl --create-home --home-dir /home/etl \
        --shell /usr/sbin/nologin etl

WORKDIR /app

# Packaging metadata first (README*.md: the wildcard tolerates a checkout without it).
COPY setup.cfg pyproject.toml README*.md ./
COPY service/ service/
COPY actors/ actors/
COPY connectors/ connectors/
COPY dag/ dag/
COPY ddl/ ddl/
COPY fixtures/ fixtures/

# psycopg2-binary and the rest ship wheels: no compiler needed on slim.
RUN pip install --no-cache-dir . \
 && rm -rf build ./*.egg-info \
 && mkdir -p /data /exports /rejects \
 && cp -r fixtures/. /data/ \
 && chown -R etl:etl /data /exports /rejects

# Defaults for a container; docker-compose.yml sets them explicitly as well.
ENV ETL_DATA_DIR=/data \
    ETL_EXPORT_DIR=/exports \
    ETL_REJECT_DIR=/rejects \
    ETL_API_BIND=0.0.0.0:8080

USER etl
EXPOSE 8080

ENTRYPOINT ["etl"]
CMD ["coordinator"]
