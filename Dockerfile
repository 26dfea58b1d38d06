# One image for all three faces: `executor run`, `executor argo-plugin`, `executor tekton-controller`.
# The binary is the one `make build` makes (static, CGO off) and `make test` tests.
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
