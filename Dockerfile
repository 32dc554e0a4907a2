# lading: ONE image for the operator and the Spark apps (see docs/install.md#the-image).
#
#   Spark pods (spark-operator):  ENTRYPOINT /opt/entrypoint.sh driver|executor ...
#                                 mainApplicationFile local:///opt/lading/spark_apps/lading_jobs/main.py
#   operator (Helm chart):        command: ["python", "-m", "lading_operator"]
#
# Spark itself, JVM side and Python side, is the pyspark wheel pinned in
# requirements.lock (SPARK_HOME points into it), so the pods run exactly the
# Spark, pyarrow and boto3 the tests run. The official Apache Spark image
# supplies the Java runtime Apache builds Spark with, and its entrypoint.sh /
# decom.sh, which spark-operator's pods call. Its own Spark and its Python
# (Ubuntu 22.04's 3.10, too old for the lock's numpy 2.4) are not used.
#
# Build: docker build -t ghcr.io/lading/lading:0.1.0 .

# --- the official Apache Spark image: Java runtime and the Kubernetes entrypoint.
FROM apache/spark:4.1.2-scala2.13-java17-ubuntu AS spark

# --- build: a virtualenv with the runtime dependencies at the lock's exact versions.
FROM python:3.11.14-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY requirements.lock pyproject.toml ./
# pyproject's dependencies, constrained to requirements.lock: every package that
# lands in the image, direct or transitive, must be pinned there (checked below).
RUN python -m venv /opt/venv \
 && python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > runtime.txt \
 && /opt/venv/bin/pip install --constraint requirements.lock --requirement runtime.txt \
 && /opt/venv/bin/pip check \
 && /opt/venv/bin/pip freeze --all --exclude-editable | grep -vE '^(pip|setuptools|wheel)==' > installed.txt \
 && if grep -vxFf requirements.lock installed.txt; then echo "^ installed but not pinned in requirements.lock" >&2; exit 1; fi

# --- runtime.
FROM python:3.11.14-slim-bookworm
ARG SPARK_UID=185
# tini and nss_wrapper: what the Spark entrypoint runs under; procps: decom.sh.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini libnss-wrapper procps \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid=${SPARK_UID} spark \
 && useradd --system --uid=${SPARK_UID} --gid=spark --home-dir /nonexistent --shell /usr/sbin/nologin spark \
 && mkdir -p /opt/spark/work-dir /opt/lading \
 && chown spark:spark /opt/spark/work-dir && chmod g+w /opt/spark/work-dir

COPY --from=spark /opt/java/openjdk /opt/java/openjdk
COPY --from=spark /opt/entrypoint.sh /opt/decom.sh /opt/
COPY --from=build /opt/venv /opt/venv

# The repository layout the job contract names: /opt/lading/spark_apps/lading_jobs/main.py.
COPY spark_apps /opt/lading/spark_apps
COPY operator /opt/lading/operator
COPY lading /opt/lading/lading

ENV JAVA_HOME=/opt/java/openjdk \
    SPARK_HOME=/opt/venv/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python \
    PYTHONPATH=/opt/lading/spark_apps:/opt/lading/operator:/opt/lading \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:/opt/java/openjdk/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

WORKDIR /opt/spark/work-dir
USER 185:185
ENTRYPOINT ["/opt/entrypoint.sh"]
CMD ["python", "-m", "lading_operator"]
