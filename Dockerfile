# specprobe image; its default command is the node daemon (`specprobe daemon`,
# deployed by deploy/kubernetes). Build: docker build -t specprobe .
#
# The BPF objects (bpf/*.o) are committed, so the build needs only Go. cgo
# stays on because go-nvml dlopens libnvidia-ml.so.1 at run time.
FROM golang:1.26-bookworm AS build
ENV CGO_ENABLED=1
# Silences go-nvml's deprecation warnings (see the Makefile).
ENV CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations"
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -ldflags "-s -w" -o /out/specprobe ./cmd/specprobe

# Runtime: glibc (for cgo and dlopen) and nothing else installed; only the
# binary is copied in. At run time the container needs:
#   - hostPID, to see the node's processes (the traced servers);
#   - capabilities BPF, PERFMON, SYS_PTRACE and DAC_READ_SEARCH, as uid 0,
#     with seccomp and AppArmor unconfined (Linux >= 5.11: no SYS_RESOURCE);
#     deploy/kubernetes/specprobe.yaml says why for each;
#   - for GPU state (NVML): the NVIDIA container toolkit, which mounts
#     libnvidia-ml.so.1 into the container; without it GPU state is off and
#     tracing goes on.
FROM debian:bookworm-slim
COPY --from=build /out/specprobe /usr/local/bin/specprobe
ENTRYPOINT ["/usr/local/bin/specprobe"]
CMD ["daemon"]
