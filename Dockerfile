# Builds the console, the agent and the checkout demo service into one small image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/console ./cmd/console && \
    CGO_ENABLED=0 go build -o /out/agent ./cmd/agent && \
    CGO_ENABLED=0 go build -o /out/checkout ./examples/checkout && \
    mkdir -p /state/var/lib/switchyard

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/ /usr/local/bin/
# The snapshot directory of the agent and of SDK processes, owned by the
# runtime user (distroless nonroot, 65532): a named volume mounted there
# starts as a copy of it, so snapshot writes succeed (the image has no
# shell to create it at run time).
COPY --from=build --chown=65532:65532 /state/var/lib/switchyard /var/lib/switchyard
USER nonroot
ENTRYPOINT ["/usr/local/bin/console"]
