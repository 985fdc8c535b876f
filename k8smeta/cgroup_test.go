package k8smeta

import (
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

const (
	hexA   = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
	hexB   = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	uid    = "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"
	uidSys = "1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901"

	// Pod slices of the systemd cgroup driver, one per QoS class.
	burstable  = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidSys + ".slice"
	besteffort = "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidSys + ".slice"
	guaranteed = "0::/kubepods.slice/kubepods-pod" + uidSys + ".slice"
	// Pod directory of the cgroupfs driver (cgroup v1).
	cgroupfsPod = "/kubepods/burstable/pod" + uid + "/"
)

var cgroupCases = []struct {
	name, data       string
	id, runtime, pod string
}{
	{"v2 systemd containerd burstable", burstable + "/cri-containerd-" + hexA + ".scope\n", hexA, "containerd", uid},
	{"v2 systemd containerd besteffort", besteffort + "/cri-containerd-" + hexA + ".scope\n", hexA, "containerd", uid},
	{"v2 systemd guaranteed", guaranteed + "/cri-containerd-" + hexA + ".scope\n", hexA, "containerd", uid},
	{"v2 systemd cri-o", burstable + "/crio-" + hexB + ".scope\n", hexB, "cri-o", uid},
	{"v2 systemd cri-o conmon is not the container", burstable + "/crio-conmon-" + hexB + ".scope\n", "", "", uid},
	{"v2 systemd docker (dockershim)", besteffort + "/docker-" + hexA + ".scope\n", hexA, "docker", uid},
	{"v2 sub-cgroup below the scope", guaranteed + "/cri-containerd-" + hexA + ".scope/init\n", hexA, "containerd", uid},
	{"v2 pod-level cgroup only", burstable + "\n", "", "", uid},
	{"v1 cgroupfs", "12:memory:" + cgroupfsPod + hexA + "\n11:cpu,cpuacct:" + cgroupfsPod + hexA + "\n1:name=systemd:" + cgroupfsPod + hexA + "\n", hexA, "", uid},
	{"v1 cgroupfs guaranteed, cri-o", "10:pids:/kubepods/pod" + uid + "/crio-" + hexB + "\n", hexB, "cri-o", uid},
	{"v1 id found on a later line", "13:rdma:/\n12:memory:" + cgroupfsPod + hexA + "\n", hexA, "", uid},
	{"v1 hybrid with empty v2 line", "12:devices:" + cgroupfsPod + hexA + "\n0::/\n", hexA, "", uid},
	{"docker v2 systemd", "0::/system.slice/docker-" + hexA + ".scope\n", hexA, "docker", ""},
	{"docker v1 cgroupfs", "12:memory:/docker/" + hexA + "\n11:cpu,cpuacct:/docker/" + hexA + "\n", hexA, "docker", ""},
	{"docker in docker takes the innermost", "0::/docker/" + hexA + "/docker/" + hexB + "\n", hexB, "docker", ""},
	{"pod-like segment outside kubepods is ignored", "0::/system.slice/pod" + uid + "\n", "", "", ""},
	{"host session", "0::/user.slice/user-1000.slice/session-2.scope\n", "", "", ""},
	{"host service", "0::/system.slice/sshd.service\n", "", "", ""},
	{"root", "0::/\n", "", "", ""},
	{"empty", "", "", "", ""},
	{"garbage", "\x00\xff::::\n::\n:\nnot a cgroup file", "", "", ""},
	{"uppercase id is not an id", "0::/system.slice/docker-" + strings.ToUpper(hexA) + ".scope\n", "", "", ""},
	{"short id", "0::/system.slice/docker-" + hexA[:63] + ".scope\n", "", "", ""},
	{"bad pod uid", "0::/kubepods.slice/kubepods-pod1b2c3d4e_5f60.slice\n", "", "", ""},
	{"CRLF", "0::/system.slice/docker-" + hexA + ".scope\r\n", hexA, "docker", ""},
}

func TestParseCgroup(t *testing.T) {
	for _, tc := range cgroupCases {
		t.Run(tc.name, func(t *testing.T) {
			id, rt, pod := ParseCgroup([]byte(tc.data))
			if id != tc.id || rt != tc.runtime || pod != tc.pod {
				t.Errorf("ParseCgroup = (%q, %q, %q), want (%q, %q, %q)", id, rt, pod, tc.id, tc.runtime, tc.pod)
			}
		})
	}
}

func FuzzParseCgroup(f *testing.F) {
	for _, tc := range cgroupCases {
		f.Add([]byte(tc.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		id, rt, pod := ParseCgroup(data)
		if id != "" && !isHex(id, 64) {
			t.Fatalf("container id %q is not 64 lowercase hex", id)
		}
		if pod != "" && !isUUID(pod) {
			t.Fatalf("pod uid %q is not a uuid", pod)
		}
		switch rt {
		case "", "docker", "containerd", "cri-o":
		default:
			t.Fatalf("unexpected runtime %q", rt)
		}
		if id == "" && rt != "" {
			t.Fatalf("runtime %q without container id", rt)
		}
	})
}

func TestAttributes(t *testing.T) {
	if got := (Info{}).Attributes(); len(got) != 0 {
		t.Errorf("empty Info: %v, want none", got)
	}
	got := Info{
		ContainerID: hexA, Runtime: "containerd", PodUID: uid, PodName: "vllm-0",
		Namespace: "inference", ContainerName: "server", NodeName: "gpu-node-1",
	}.Attributes()
	want := []attribute.KeyValue{
		attribute.String("container.id", hexA),
		attribute.String("container.runtime", "containerd"),
		attribute.String("k8s.pod.uid", uid),
		attribute.String("k8s.pod.name", "vllm-0"),
		attribute.String("k8s.namespace.name", "inference"),
		attribute.String("k8s.container.name", "server"),
		attribute.String("k8s.node.name", "gpu-node-1"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Attributes = %v, want %v", got, want)
	}
	got = Info{ContainerID: hexA}.Attributes()
	if len(got) != 1 || got[0] != attribute.String("container.id", hexA) {
		t.Errorf("container-only Attributes = %v", got)
	}
}
