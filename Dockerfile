# The gregor image: docker build -t gregor . ; see docker-compose.yml.
# It is configured as the apache/kafka image is, by KAFKA_* variables and
# CLUSTER_ID (gregor container -h), and runs as a non-root user.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /gregor ./cmd/gregor
RUN mkdir -p /root-fs/var/lib/gregor/data /root-fs/var/lib/gregor/config \
    /root-fs/mnt/shared/config /root-fs/etc/kafka/secrets

FROM debian:bookworm-slim
COPY --from=build /gregor /usr/local/bin/gregor
COPY --from=build --chown=1000:1000 /root-fs/ /
USER 1000:1000
VOLUME /var/lib/gregor/data
EXPOSE 9092 9093 9644
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s \
    CMD ["gregor", "container-health"]
ENTRYPOINT ["gregor"]
CMD ["container"]
