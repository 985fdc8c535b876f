# specprobe runtime image. The BPF objects are committed, so the build needs
# only Go; the image needs nothing but the binary.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/specprobe ./cmd/specprobe

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/specprobe /usr/local/bin/specprobe
# Needs CAP_BPF and CAP_PERFMON (or privileged), and hostPID to see the target.
ENTRYPOINT ["/usr/local/bin/specprobe"]
