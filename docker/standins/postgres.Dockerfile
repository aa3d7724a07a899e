# A local stand-in for `postgres:15`, for machines that reach Debian's packages but no
# container registry (built by `etl drill compose`, see docs/compose.md). It keeps the
# official image's interface as docker-compose.yml uses it: POSTGRES_USER, POSTGRES_PASSWORD,
# POSTGRES_DB, PGDATA (a volume at /var/lib/postgresql/data), the scripts of
# /docker-entrypoint-initdb.d run once on an empty data directory, pg_isready on PATH, a
# UTF-8 cluster, password authentication over TCP, SIGINT as the stop signal.
FROM etl-standin-base:bookworm

ENV LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive

# Debian's package would create a cluster of its own at install time: not wanted here.
RUN mkdir -p /etc/postgresql-common/createcluster.d \
 && echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/no-main.conf \
 && apt-get update -q \
 && apt-get install -y -q --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /docker-entrypoint-initdb.d /var/lib/postgresql/data /var/run/postgresql \
 && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql

ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /var/lib/postgresql/data
LABEL org.etl-platform.standin="postgres:15"
ENTRYPOINT ["docker-entrypoint.sh"]
STOPSIGNAL SIGINT
EXPOSE 5432
CMD ["postgres"]
