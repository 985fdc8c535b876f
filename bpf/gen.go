// Package bpf holds the BPF programs specprobe loads and their generated Go
// bindings. The objects are committed so `go build` needs no clang; `make
// generate` rebuilds them.
package bpf

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -type event -type event_str -type watch_event -type event_cuda -type cuda_snap -type site_config -type value_spec -type watch -type pyframe_layout -type pylayout -type pyprog -type pyfield -type pystep -type pyname -type kind -type watch_flag -type event_ext -type py_limit -type py_root -type py_op -type py_tag -type py_err -type py_field_flag -type py_argkind -type py_mark -type kept_reg -type kept_config Stage stage.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel Exec exec.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel Kept kept.c
