# syntax=docker/dockerfile:1
# The operator's image: the manager, the API server, and the agent that every kernel pod copies
# out of it. Both binaries are static, so the final stage has nothing else in it.
# Without Docker, `make image` builds the same image with go-containerregistry (hack/image).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/nbkube ./cmd/nbkube \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/nbkube-agent ./cmd/nbkube-agent

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/nbkube /out/nbkube-agent /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/nbkube"]
