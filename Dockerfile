# specprobe runtime image. The BPF objects are committed, so the build needs
# only Go; cgo stays on because go-nvml loads libnvidia-ml.so.1 at run time
# (the NVIDIA container toolkit mounts it; without it GPU state is off).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -ldflags "-s -w" -o /out/specprobe ./cmd/specprobe

FROM debian:bookworm-slim
COPY --from=build /out/specprobe /usr/local/bin/specprobe
# Needs CAP_BPF and CAP_PERFMON (or privileged), and hostPID to see the target.
ENTRYPOINT ["/usr/local/bin/specprobe"]
