# Builds the console, the agent and the checkout demo service into one small image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/console ./cmd/console && \
    CGO_ENABLED=0 go build -o /out/agent ./cmd/agent && \
    CGO_ENABLED=0 go build -o /out/checkout ./examples/checkout

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/ /usr/local/bin/
USER nonroot
ENTRYPOINT ["/usr/local/bin/console"]
