# pysched container image: slim Python, non-root (65532), works with a read-only root filesystem.
# Build: make image   (needs a Docker engine; not part of `make test`)
FROM python:3.11-slim AS build
WORKDIR /src
COPY requirements.lock pyproject.toml README.md ./
COPY scheduler ./scheduler
RUN pip install --no-cache-dir --upgrade pip \
 && pip wheel --no-cache-dir --no-deps -w /wheels -r requirements.lock \
 && pip wheel --no-cache-dir --no-deps -w /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-deps /wheels/*.whl && rm -rf /wheels \
 && python -c "import pysched, pysched.plugins, kopf, numpy, orjson"
USER 65532:65532
EXPOSE 10259
ENTRYPOINT ["pysched"]
CMD ["--config", "/etc/pysched/config.yaml"]
