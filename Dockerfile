# One image for all three faces: `executor run`, `executor argo-plugin`, `executor tekton-controller`.
# The binary is the one `make build` makes (static, CGO off) and `make test` tests.
# For users who build with Docker (`make docker-image`); `make image` builds the same image with no
# container engine (internal/image), and test/e2e/image checks that the two ship the same binary
# path, entrypoint and user.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make build

# Static and non-root: distroless has no shell, no package manager, uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/executor /executor
USER 65532:65532
ENTRYPOINT ["/executor"]
