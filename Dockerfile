# Every MetaTune image, one target each, built from the repository root (compose/docker-compose.yml
# gives the context, the target and SOURCE):
#   docker build --target scheduler --build-arg SOURCE=services/scheduler -t metatune/scheduler .
# Targets: profiler, recommender, forecaster, scheduler, telemetry, trainer-agent (image
# metatune/<target>, package metatune_<target with _>), and cli (metatune/cli: the tools on the
# core, for one-shot operator commands such as `metatune bus-init`; no service image has them).
# The knowledge base's package (kb/: the seed build and the `metatune kb` commands) is in no image:
# it sits above the services it trains and profiles through (scripts/install installs it).
#
# build: the package in SOURCE and the core (./shared) into a venv at the versions CI tested,
#   requirements.lock as constraints (its pins, without the development tools or the embedded
#   NATS and PostgreSQL). torch is locked to its CPU build (2.13.0+cpu), from the PyTorch index of
#   TORCH_VARIANT: cu128 (or another CUDA build on that index) turns the lock's pin into the CUDA
#   wheel of the same version (compose/docker-compose.gpu.yml builds metatune/trainer-agent:cuda
#   so; the host needs the NVIDIA driver and Container Toolkit, the CUDA runtime is in the wheels).
# runtime: only that venv on a slim base, run as the unprivileged user metatune (uid 10001).
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/metatune
WORKDIR /build
ARG TORCH_VARIANT=cpu
COPY requirements.lock ./
RUN sed -i "s/^torch==\([^+]*\)+cpu$/torch==\1+${TORCH_VARIANT}/" requirements.lock
COPY shared shared
ARG SOURCE
RUN test -n "$SOURCE" || { echo "set --build-arg SOURCE=services/<name> (or cli)" >&2; exit 1; }
COPY ${SOURCE} ${SOURCE}
RUN /opt/metatune/bin/pip install -c requirements.lock ./shared ./${SOURCE} \
      --extra-index-url https://download.pytorch.org/whl/${TORCH_VARIANT}

FROM python:3.11-slim AS runtime
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/metatune metatune \
 && install -d -o metatune -g metatune /var/lib/metatune
COPY --from=build /opt/metatune /opt/metatune
ENV PATH=/opt/metatune/bin:$PATH PYTHONUNBUFFERED=1 METATUNE_DATA_DIR=/var/lib/metatune \
    HF_HUB_OFFLINE=1
USER metatune
WORKDIR /home/metatune

FROM runtime AS profiler
CMD ["python", "-m", "metatune_profiler"]

FROM runtime AS recommender
CMD ["python", "-m", "metatune_recommender"]

FROM runtime AS forecaster
CMD ["python", "-m", "metatune_forecaster"]

FROM runtime AS scheduler
CMD ["python", "-m", "metatune_scheduler"]

FROM runtime AS telemetry
USER root
# the webhook key's own volume (compose mounts it on telemetry alone), opened by nobody else
RUN install -d -m 0700 -o metatune -g metatune /var/lib/metatune-telemetry
USER metatune
CMD ["python", "-m", "metatune_telemetry"]

FROM runtime AS trainer-agent
# NVML (GPU power, memory) needs the "utility" capability; one container per datacenter: set
# METATUNE_DATACENTER (e.g. fra1)
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility
CMD ["python", "-m", "metatune_trainer_agent"]

FROM runtime AS cli
CMD ["metatune", "--help"]
