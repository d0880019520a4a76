# A gregor image: docker build -t gregor . ; see docker-compose.yml.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /gregor ./cmd/gregor

FROM debian:bookworm-slim
COPY --from=build /gregor /usr/local/bin/gregor
VOLUME /data
EXPOSE 9092 9093
ENTRYPOINT ["gregor"]
CMD ["serve", "--data-dir", "/data", "--listen", "0.0.0.0:9092", "--override", "advertised.listeners=PLAINTEXT://localhost:9092"]
