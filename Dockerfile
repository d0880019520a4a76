# The gregor image: docker build -t gregor . ; see docker-compose.yml.
# It is configured as the apache/kafka image is, by KAFKA_* variables and
# CLUSTER_ID (gregor container -h), and runs as a non-root user.
#
# gregor is one static binary, so the image is FROM scratch: the binary,
# the user it runs as, CA certificates, /tmp and the image's directories.
# GO_IMAGE names the toolchain image; scripts/image-test.sh builds with a
# local one where no registry is reachable.
ARG GO_IMAGE=golang:1.26-bookworm

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=${VERSION}" \
        -o /root-fs/usr/local/bin/gregor ./cmd/gregor
# Two trees: /root-fs is owned by root (the binary, /etc, /tmp), /owned-fs
# by the gregor user (the directories gregor container writes to).
RUN mkdir -p /root-fs/etc/ssl/certs /root-fs/tmp \
        /owned-fs/var/lib/gregor/data /owned-fs/var/lib/gregor/config \
        /owned-fs/mnt/shared/config /owned-fs/etc/kafka/secrets \
    && chmod 1777 /root-fs/tmp \
    && cp /etc/ssl/certs/ca-certificates.crt /root-fs/etc/ssl/certs/ \
    && echo 'root:x:0:0:root:/root:/sbin/nologin' > /root-fs/etc/passwd \
    && echo 'gregor:x:1000:1000:gregor:/var/lib/gregor:/sbin/nologin' >> /root-fs/etc/passwd \
    && echo 'root:x:0:' > /root-fs/etc/group \
    && echo 'gregor:x:1000:' >> /root-fs/etc/group

FROM scratch
COPY --from=build /root-fs/ /
COPY --from=build --chown=1000:1000 /owned-fs/ /
USER 1000:1000
ENV HOME=/var/lib/gregor
VOLUME /var/lib/gregor/data
EXPOSE 9092 9093 9644
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s \
    CMD ["gregor", "container-health"]
ENTRYPOINT ["gregor"]
CMD ["container"]
