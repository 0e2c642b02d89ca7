# syntax=docker/dockerfile:1
# The operator's image: the manager, the API server, and the agent that every kernel pod copies
# out of it. Both binaries are static, so the final stage has nothing else in it.
# Without Docker, `make image` builds the same image with go-containerregistry (hack/image).
# The web pages are built from npm packages (web/package-lock.json) and embedded by go build.
FROM node:20-bookworm AS web
WORKDIR /src/web
COPY web/package.json web/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY web/ ./
RUN node build.mjs

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
COPY --from=web /src/web/dist/ web/dist/
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/nbkube ./cmd/nbkube \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/nbkube-agent ./cmd/nbkube-agent

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/nbkube /out/nbkube-agent /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/nbkube"]
