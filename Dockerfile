# Multi-stage build of the one cinder-csi-operator binary. The builder and base images are build
# arguments so a CI system can swap in its own (for example OpenShift's builder images).
ARG BUILDER_IMAGE=golang:1.26
ARG BASE_IMAGE=scratch

FROM ${BUILDER_IMAGE} AS builder
WORKDIR /src
# Dependencies in their own layer: rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY controlplane/ controlplane/
COPY guest/ guest/
COPY manifests/ manifests/
COPY shared/ shared/
ARG VERSION=dev
# The same command `make build` and `make verify` run.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/cinder-csi-operator ./cmd/cinder-csi-operator

FROM ${BASE_IMAGE}
# System roots, for OpenStack endpoints with publicly trusted certificates; a private CA comes
# from the cluster's configuration instead.
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=builder /out/cinder-csi-operator /usr/bin/cinder-csi-operator
# Non-root, numeric so that runAsNonRoot can verify it; the binary writes nothing to its root
# filesystem, so the pod can run with readOnlyRootFilesystem.
USER 65532:65532
ENTRYPOINT ["/usr/bin/cinder-csi-operator"]
