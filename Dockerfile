# Multi-stage build: a static binary (CGO_ENABLED=0) on distroless, running as non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
    -o /out/cardwriter-mcp ./cmd/cardwriter-mcp

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/cardwriter-mcp /usr/local/bin/cardwriter-mcp
USER nonroot:nonroot
EXPOSE 8090
# The health check asks the sandbox (the default command); for `http`, set CARDWRITER_URL to
# http://127.0.0.1:8080/healthz (or the address given with --addr).
ENV CARDWRITER_URL=http://127.0.0.1:8090/open/v1/me
HEALTHCHECK --interval=30s --timeout=5s CMD ["/usr/local/bin/cardwriter-mcp", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/cardwriter-mcp"]
# The sandbox listens on all interfaces inside the container; publish it with -p 127.0.0.1:8090:8090.
CMD ["sandbox", "--addr", "0.0.0.0:8090"]
