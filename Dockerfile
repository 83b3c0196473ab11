# The Coxswain image: one static binary that runs as `coxswain controller` and `coxswain proxy`
# (the Helm chart uses it for both). Build it with `make image` (docker or podman); nothing in
# `make test` needs a container runtime.
#
# Stage 1 builds on the build machine's platform and cross-compiles for the target one; stage 2
# is distroless/static:nonroot: no shell, no libc (CGO_ENABLED=0), user 65532.
FROM --platform=$BUILDPLATFORM golang:1.27.3 AS build
# go.mod needs Go >= 1.27; pin the toolchain exactly as the Makefile does.
ENV GOTOOLCHAIN=go1.27.3 CGO_ENABLED=0 GOFLAGS=-trimpath
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH
ARG VERSION=dev
ARG COMMIT=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build \
      -ldflags "-s -w -X github.com/coxswain-labs/coxswain/cmd/proxycmd.version=${VERSION} -X github.com/coxswain-labs/coxswain/cmd/proxycmd.commit=${COMMIT}" \
      -o /out/coxswain ./cmd/coxswain

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/coxswain /coxswain
USER 65532:65532
ENTRYPOINT ["/coxswain"]
