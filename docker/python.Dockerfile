# The Python matrix drivers (python-confluent-kafka, python-kafka-python):
# matrix/clients/python/driver*.py (not the tests) in a virtualenv with the pinned libraries
# of requirements.txt from PyPI. The container speaks the line-delimited JSON
# driver protocol (matrix/README.md) on stdin and stdout; its one argument is
# the client id.
#
#   docker build -f docker/python.Dockerfile -t cascade/matrix-python .
#   docker run -i --rm --network host cascade/matrix-python python-kafka-python
#
# BASE_IMAGE needs python3 with the venv module (build context: the
# repository root).
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE}
COPY matrix/clients/python/requirements.txt /driver/requirements.txt
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check --no-input --quiet \
      --only-binary=confluent-kafka -r /driver/requirements.txt \
 && /opt/venv/bin/python -c "import confluent_kafka, kafka, lz4.frame, snappy, cramjam, zstandard"
COPY matrix/clients/python/driver.py matrix/clients/python/driver_common.py matrix/clients/python/driver_txn.py /driver/
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
USER 65534:65534
ENTRYPOINT ["/opt/venv/bin/python", "/driver/driver.py"]
CMD ["python-confluent-kafka"]
