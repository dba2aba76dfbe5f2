# Multi-stage: a static binary on a distroless base, run as non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/switchboard ./cmd/switchboard

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/switchboard /usr/local/bin/switchboard
USER nonroot:nonroot
EXPOSE 8080
# In a container the gateway must listen on all interfaces; with no
# --config it serves the offline demo.
ENV SWITCHBOARD_LISTEN=0.0.0.0:8080
ENTRYPOINT ["/usr/local/bin/switchboard"]
CMD ["serve"]
