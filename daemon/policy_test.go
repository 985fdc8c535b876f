package daemon

import "testing"

func TestSelect(t *testing.T) {
	pod := Owner{UID: 1000, Cgroup: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podabc.slice/cri-containerd-1.scope",
		PodUID: "abc", Namespace: "inference", Pod: "vllm-0"}
	for _, tc := range []struct {
		name  string
		s     Select
		o     Owner
		allow bool
	}{
		{"empty selects all", Select{}, pod, true},
		{"uid listed", Select{UIDs: []int{0, 1000}}, pod, true},
		{"uid not listed", Select{UIDs: []int{0}}, pod, false},
		{"cgroup above", Select{Cgroups: []string{"/kubepods.slice/*"}}, pod, true},
		{"cgroup elsewhere", Select{Cgroups: []string{"/system.slice/*"}}, pod, false},
		{"namespace", Select{Namespaces: []string{"inference"}}, pod, true},
		{"other namespace", Select{Namespaces: []string{"prod"}}, pod, false},
		{"pod pattern", Select{Pods: []string{"vllm-*"}}, pod, true},
		{"pod pattern misses", Select{Pods: []string{"sglang-*"}}, pod, false},
		{"pod unknown", Select{Pods: []string{"*"}}, Owner{UID: 0}, false},
		{"every list must pass", Select{UIDs: []int{1000}, Namespaces: []string{"prod"}}, pod, false},
	} {
		if got := tc.s.allows(tc.o) == ""; got != tc.allow {
			t.Errorf("%s: allows = %v (%q), want %v", tc.name, got, tc.s.allows(tc.o), tc.allow)
		}
	}
}

// TestCapHit: a non-root user fills max_per_uid and waits while root's
// server still gets a slot; a pod fills max_per_pod.
func TestCapHit(t *testing.T) {
	c := Config{MaxProcesses: 4, MaxPerUID: 2, MaxPerPod: 2}
	user := Owner{UID: 1000}
	root := Owner{UID: 0}
	podA := Owner{UID: 0, PodUID: "a"}
	for _, tc := range []struct {
		name   string
		traced []Owner
		o      Owner
		want   string
	}{
		{"free", nil, user, ""},
		{"user at its cap", []Owner{user, user}, user, reasonMaxPerUID},
		{"root past the user's cap", []Owner{user, user}, root, ""},
		{"root is not capped per uid", []Owner{root, root, root}, root, ""},
		{"all slots", []Owner{root, root, root, root}, root, reasonMaxProcesses},
		{"pod at its cap", []Owner{podA, podA}, podA, reasonMaxPerPod},
		{"another pod", []Owner{podA, podA}, Owner{UID: 0, PodUID: "b"}, ""},
	} {
		if got := c.capHit(tc.traced, tc.o); got != tc.want {
			t.Errorf("%s: capHit = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := (Config{MaxProcesses: 16}).capHit([]Owner{user, user, user, user, user}, user); got != "" {
		t.Errorf("caps 0 mean none: %q", got)
	}
}

func TestCgroupPath(t *testing.T) {
	for in, want := range map[string]string{
		"0::/user.slice/user-1000.slice/session-2.scope\n":      "/user.slice/user-1000.slice/session-2.scope",
		"12:memory:/kubepods/pod1/abc\n0::/kubepods/pod1/abc\n": "/kubepods/pod1/abc",
		"12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n":   "/docker/abc",
		"": "",
	} {
		if got := cgroupPath([]byte(in)); got != want {
			t.Errorf("cgroupPath(%q) = %q, want %q", in, got, want)
		}
	}
}
