# kuberaven's image: `docker build -t kuberaven:0.1.0 .`, then deploy/kuberaven.yaml.
FROM python:3.11-slim-bookworm
# iproute2: kuberaven-cni (deploy/kuberaven-cni.yaml) wires pods with the ip command.
RUN apt-get update && apt-get install -y --no-install-recommends iproute2 && rm -rf /var/lib/apt/lists/*
RUN useradd --uid 10001 --create-home kuberaven
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir . && rm -rf /app/src
USER 10001
EXPOSE 8080
ENTRYPOINT ["kuberaven"]
CMD ["run", "--log-format", "json"]
