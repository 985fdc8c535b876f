package k8smeta

import (
	"context"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLookupFromKubelet(t *testing.T) {
	e := newEnv(t, Config{NodeName: "gpu-node-1"})
	ctx := context.Background()

	got := e.r.Lookup(ctx, 100)
	want := Info{ContainerID: hexA, Runtime: "containerd", PodUID: uid, PodName: "vllm-0",
		Namespace: "inference", ContainerName: "server", NodeName: "gpu-node-1"}
	if got != want {
		t.Errorf("Lookup(100) = %+v, want %+v", got, want)
	}
	if a := e.k.lastAuth(); a != "Bearer tok-123" {
		t.Errorf("Authorization = %q, want bearer token", a)
	}
	if err := e.r.Err(); err != nil {
		t.Errorf("Err = %v", err)
	}
	if got := e.r.Lookup(ctx, 101).ContainerName; got != "model-download" {
		t.Errorf("init container name = %q", got)
	}
	// cgroupfs paths do not name the runtime; the pod status does.
	if got := e.r.Lookup(ctx, 103); got.Runtime != "containerd" || got.ContainerName != "server" {
		t.Errorf("Lookup(103) = %+v", got)
	}
	e.wantRequests(t, 1)

	// Not in a pod, or gone: no kubelet request, only the node.
	for _, pid := range []int{102, 999} {
		if got := e.r.Lookup(ctx, pid); got != (Info{NodeName: "gpu-node-1"}) {
			t.Errorf("Lookup(%d) = %+v", pid, got)
		}
	}
	e.wantRequests(t, 1)
}

func TestLookupWithoutToken(t *testing.T) {
	e := newEnv(t, Config{TokenFile: filepath.Join(t.TempDir(), "missing")})
	got := e.r.Lookup(context.Background(), 100)
	if got.PodName != "vllm-0" || got.NodeName != "gpu-node-1" { // node from spec.nodeName
		t.Errorf("Lookup = %+v", got)
	}
	if a := e.k.lastAuth(); a != "" {
		t.Errorf("Authorization = %q, want none", a)
	}
}

func TestCacheAndRefresh(t *testing.T) {
	e := newEnv(t, Config{Refresh: 10 * time.Second})
	ctx := context.Background()

	e.r.Lookup(ctx, 100)
	e.wantRequests(t, 1)
	e.c.advance(5 * time.Second)
	if e.r.Lookup(ctx, 100).PodName != "vllm-0" {
		t.Fatal("cached pod lost")
	}
	e.wantRequests(t, 1) // known pod inside Refresh: cache

	// A pod the kubelet does not list yet: refetch, but at most once a second.
	if got := e.r.Lookup(ctx, 200); got.PodUID != uid2 || got.PodName != "" {
		t.Fatalf("Lookup(200) = %+v", got)
	}
	e.wantRequests(t, 2)
	e.r.Lookup(ctx, 200)
	e.c.advance(500 * time.Millisecond)
	e.r.Lookup(ctx, 200)
	e.wantRequests(t, 2)

	e.k.addPod(podJSON("llama-1", "batch", uid2, "worker", hexB))
	e.c.advance(500 * time.Millisecond)
	if got := e.r.Lookup(ctx, 200); got.PodName != "llama-1" || got.ContainerName != "worker" {
		t.Fatalf("Lookup(200) after pod start = %+v", got)
	}
	e.wantRequests(t, 3)

	e.c.advance(9 * time.Second)
	e.r.Lookup(ctx, 100)
	e.wantRequests(t, 3)
	e.c.advance(time.Second) // Refresh since the last fetch
	e.r.Lookup(ctx, 100)
	e.wantRequests(t, 4)
}

func TestKubeletDown(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	e.k.down.Store(true)

	got := e.r.Lookup(ctx, 100)
	if got.ContainerID != hexA || got.PodUID != uid || got.PodName != "" {
		t.Errorf("Lookup with kubelet down = %+v", got)
	}
	if e.r.Err() == nil {
		t.Fatal("Err = nil with kubelet down")
	}
	e.r.Lookup(ctx, 100) // a failing kubelet is retried no faster than a miss
	e.wantRequests(t, 1)

	e.k.down.Store(false)
	e.c.advance(time.Second)
	if got := e.r.Lookup(ctx, 100); got.PodName != "vllm-0" {
		t.Errorf("Lookup after recovery = %+v", got)
	}
	if err := e.r.Err(); err != nil {
		t.Errorf("Err after recovery = %v", err)
	}

	// Down again after a refresh: known names survive, the error is reported.
	e.k.down.Store(true)
	e.c.advance(10 * time.Second)
	if got := e.r.Lookup(ctx, 100); got.PodName != "vllm-0" {
		t.Errorf("stale pod dropped: %+v", got)
	}
	if e.r.Err() == nil {
		t.Error("Err = nil with kubelet down again")
	}
}

func TestNoKubelet(t *testing.T) {
	t.Setenv("KUBELET_URL", "")
	t.Setenv("NODE_IP", "")
	t.Setenv("NODE_NAME", "")
	r, err := NewResolver(Config{ProcRoot: fakeProc(t, testProcs)})
	if err != nil {
		t.Fatal(err)
	}
	got := r.Lookup(context.Background(), 100)
	if got != (Info{ContainerID: hexA, Runtime: "containerd", PodUID: uid}) {
		t.Errorf("Lookup = %+v", got)
	}
	if r.Err() != nil {
		t.Errorf("Err = %v", r.Err())
	}
}

// TestDefaultClient checks the client NewResolver builds from the TLS settings.
func TestDefaultClient(t *testing.T) {
	k := newFakeKubelet(t, podJSON("vllm-0", "inference", uid, "server", hexA))
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.srv.Certificate().Raw})
	if err := os.WriteFile(caFile, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	proc := fakeProc(t, testProcs)
	for _, tc := range []struct {
		name   string
		cfg    Config
		wantOK bool
	}{
		{"CA file", Config{CAFile: caFile}, true},
		{"untrusted", Config{}, false},
		{"insecure", Config{InsecureSkipVerify: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.KubeletURL, tc.cfg.ProcRoot = k.srv.URL, proc
			r, err := NewResolver(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := r.Lookup(context.Background(), 100)
			if ok := got.PodName == "vllm-0"; ok != tc.wantOK || (r.Err() == nil) != tc.wantOK {
				t.Errorf("Lookup = %+v, Err = %v, want success %v", got, r.Err(), tc.wantOK)
			}
		})
	}
}

// TestPlainHTTPRefused: the token is never sent over http://; a kubelet
// port that needs no token can still be used, with token_file: none.
func TestPlainHTTPRefused(t *testing.T) {
	if _, err := NewResolver(Config{KubeletURL: "http://10.0.0.5:10255"}); err == nil || !strings.Contains(err.Error(), "plain http://") {
		t.Errorf("http:// with the token: %v, want refused", err)
	}
	t.Setenv("KUBELET_URL", "http://10.0.0.5:10255")
	if _, err := NewResolver(Config{}); err == nil {
		t.Error("http:// from $KUBELET_URL with the token: accepted")
	}
	r, err := NewResolver(Config{KubeletURL: "http://10.0.0.5:10255", TokenFile: NoToken})
	if err != nil || r.kubeletURL != "http://10.0.0.5:10255" {
		t.Errorf("http:// without a token: %v", err)
	}
}

// TestTokenNotSentWithNoToken: token_file none sends no Authorization.
func TestTokenNotSentWithNoToken(t *testing.T) {
	e := newEnv(t, Config{TokenFile: NoToken})
	if got := e.r.Lookup(context.Background(), 100); got.PodName != "vllm-0" {
		t.Errorf("Lookup = %+v", got)
	}
	if a := e.k.lastAuth(); a != "" {
		t.Errorf("Authorization = %q with token_file none", a)
	}
}

func TestNewResolverConfig(t *testing.T) {
	t.Setenv("KUBELET_URL", "")
	t.Setenv("NODE_IP", "")
	t.Setenv("NODE_NAME", "node-a")
	bad := filepath.Join(t.TempDir(), "bad.crt")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []Config{
		{KubeletURL: "://nope"},
		{KubeletURL: "ftp://10.0.0.5:10250"},
		{KubeletURL: "10.0.0.5:10250"},
		{KubeletURL: "https://"},
		{CAFile: filepath.Join(t.TempDir(), "missing.crt")},
		{CAFile: bad},
	} {
		if _, err := NewResolver(cfg); err == nil {
			t.Errorf("NewResolver(%+v) = nil error", cfg)
		}
	}

	for _, tc := range []struct{ kubeletURL, nodeIP, cfgURL, want string }{
		{"", "", "", ""},
		{"", "10.0.0.5", "", "https://10.0.0.5:10250"},
		{"", "fd00::5", "", "https://[fd00::5]:10250"},
		{"https://kubelet.local:10250/", "10.0.0.5", "", "https://kubelet.local:10250"},
		{"https://env:10250", "", "https://cfg:10250", "https://cfg:10250"},
	} {
		t.Setenv("KUBELET_URL", tc.kubeletURL)
		t.Setenv("NODE_IP", tc.nodeIP)
		r, err := NewResolver(Config{KubeletURL: tc.cfgURL})
		if err != nil {
			t.Fatal(err)
		}
		if r.kubeletURL != tc.want || r.nodeName != "node-a" || r.refresh != 10*time.Second || r.procRoot != "/proc" {
			t.Errorf("%+v: url %q node %q refresh %v proc %q", tc, r.kubeletURL, r.nodeName, r.refresh, r.procRoot)
		}
	}
}
