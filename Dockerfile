# lading: ONE image for the operator and the Spark apps (see docs/install.md#the-image).
#
#   Spark pods (spark-submit, spark-operator): the image's ENTRYPOINT with "driver ..." or "executor"
#                                 mainApplicationFile local:///opt/lading/spark_apps/lading_jobs/main.py
#   operator (Helm chart):        command: ["python", "-m", "lading_operator"]
#
# Built from Debian bookworm alone: Debian's python3 (3.11), openjdk-17-jre-headless, tini, the
# locked wheels in a virtualenv (Spark itself, JVM and Python side, is the pyspark wheel pinned in
# requirements.lock; SPARK_HOME points into it, so the pods run exactly the Spark, pyarrow and boto3
# the tests run), our code and our entrypoint (docker/entrypoint.sh), and the CSV encoder's C
# extension, compiled in the build stage. No compiler in the image, no other image.
#
# Build: scripts/image (docker where there is an engine, else buildah; it makes the base with
# debootstrap where no registry is reachable), or directly:
#   docker build -t registry.example.com/data/lading:0.1.0 .
# Behind a TLS-intercepting proxy, hand pip its CA bundle (never stored in the image):
#   docker build --secret id=pip-ca,src=/etc/ssl/certs/ca-certificates.crt ...

# --- build: a virtualenv with the runtime dependencies at the lock's exact versions.
FROM debian:bookworm-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1 DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY requirements.lock pyproject.toml ./
# pyproject's dependencies, constrained to requirements.lock: every package that
# lands in the image, direct or transitive, must be pinned there (checked below).
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && python3 -m venv /opt/venv \
 && python3 -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > runtime.txt \
 && /opt/venv/bin/pip install --constraint requirements.lock --requirement runtime.txt \
 && /opt/venv/bin/pip check \
 && /opt/venv/bin/pip freeze --all --exclude-editable | grep -vE '^(pip|setuptools|wheel)==' > installed.txt \
 && if grep -ivxFf requirements.lock installed.txt; then echo "^ installed but not pinned in requirements.lock" >&2; exit 1; fi \
 && find /opt/venv -name __pycache__ -prune -exec rm -rf {} +
RUN /opt/venv/bin/python -m compileall -q -j0 --invalidation-mode unchecked-hash /opt/venv/lib/python3.11/site-packages
# ^ Bytecode, compiled once here: pods run with a read-only root (and PYTHONDONTWRITEBYTECODE), so
# without it every Python process (a driver's app, each executor's workers, the operator) compiled
# pyspark, pyarrow, boto3 and botocore from source at every start. Hash-based, unchecked: valid
# whatever the files' times; the venv is never edited in place (pip replaces a package's bytecode
# with its files).

# The CSV encoder's C extension (lading_jobs.formats._csvlines), built by scripts/build-native for
# Debian's python3, the interpreter of the runtime stage's venv (so the same EXT_SUFFIX). After the
# venv: a change to the C source, or the compiler's layer, leaves the venv's layers cached.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev python3-dev \
 && rm -rf /var/lib/apt/lists/*
COPY scripts/build-native scripts/build-native
COPY spark_apps/lading_jobs/formats/_csvlines.c spark_apps/lading_jobs/formats/_csvlines.c
RUN PYTHON=python3 bash scripts/build-native --force

# --- runtime.
FROM debian:bookworm-slim
ARG SPARK_UID=185
ENV DEBIAN_FRONTEND=noninteractive
# python3: the venv's interpreter; the JRE Spark runs on; tini as PID 1; nss_wrapper names an
# arbitrary uid without a writable /etc/passwd (docker/entrypoint.sh). The JRE's man pages are
# skipped (bookworm-slim has no /usr/share/man/man1, which its postinst expects).
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends python3 openjdk-17-jre-headless tini libnss-wrapper \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log \
 && groupadd --system --gid=${SPARK_UID} spark \
 && useradd --system --uid=${SPARK_UID} --gid=spark --home-dir /tmp --no-create-home --shell /usr/sbin/nologin spark \
 && mkdir -p /opt/spark/work-dir /opt/spark/conf /opt/lading \
 && chown spark:spark /opt/spark/work-dir && chmod 0775 /opt/spark/work-dir

COPY --from=build /opt/venv /opt/venv

ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    SPARK_HOME=/opt/venv/lib/python3.11/site-packages/pyspark \
    SPARK_CONF_DIR=/opt/spark/conf \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python \
    PYTHONPATH=/opt/lading/spark_apps:/opt/lading/operator:/opt/lading \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

COPY docker/entrypoint.sh /opt/lading/entrypoint.sh
# A class-data-sharing archive of Spark's classes, /opt/lading/cds/spark.jsa, which the driver's and
# the executor's JVMs map (docker/entrypoint.sh; LADING_SPARK_CDS=0 turns it off): a small local
# Spark run through the entrypoint's driver mode, its classes kept when its JVM exits. It depends
# on the JRE, Spark's jars and the entrypoint only, so it stays cached while our code changes.
COPY docker/spark_cds.sh /opt/lading/cds/build.sh
COPY docker/spark_cds_workload.py /opt/lading/cds/workload.py
RUN /opt/lading/cds/build.sh && rm -rf /tmp/* /tmp/.[!.]*

# The repository layout the job contract names: /opt/lading/spark_apps/lading_jobs/main.py.
COPY spark_apps /opt/lading/spark_apps
# the C extension built above (.dockerignore keeps a work tree's own build out of `COPY spark_apps`)
COPY --from=build /src/spark_apps/lading_jobs/formats/_csvlines*.so /opt/lading/spark_apps/lading_jobs/formats/
COPY operator /opt/lading/operator
COPY lading /opt/lading/lading

# The image carries what it claims: the pinned set, consistent; Java and Spark start; the C
# extension imports; no compiler.
# Our code's bytecode (as the venv's, above), checked against the source's hash at import: an image
# built FROM this one that copies other sources over ours never runs stale bytecode.
RUN python -m compileall -q -j0 --invalidation-mode checked-hash /opt/lading \
 && /opt/venv/bin/pip check \
 && "$JAVA_HOME/bin/java" -version \
 && /opt/venv/bin/python -c "import pyspark, pyarrow, boto3, kopf, lading_jobs, lading_operator, lading_jobs.formats._csvlines" \
 && if command -v cc gcc g++ >/dev/null; then echo "a compiler is in the image" >&2; exit 1; fi

WORKDIR /opt/spark/work-dir
USER 185:185
ENTRYPOINT ["/usr/bin/tini", "-g", "--", "/opt/lading/entrypoint.sh"]
CMD ["python", "-m", "lading_operator"]
