package k8smeta

// Fixtures for the Resolver tests: a fake kubelet, a fake /proc and a settable clock.

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	hexInit = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	uid2    = "99999999-8888-7777-6666-555555555555"
)

// podJSON is one item of a kubelet /pods answer, trimmed but in the real shape.
func podJSON(name, ns, uid, container, id string) string {
	return fmt.Sprintf(`{
  "metadata": {"name": %q, "namespace": %q, "uid": %q, "labels": {"app": "vllm"}},
  "spec": {"nodeName": "gpu-node-1", "containers": [{"name": %q, "image": "vllm/vllm-openai:v0.9.0"}]},
  "status": {
    "phase": "Running", "podIP": "10.244.1.17",
    "initContainerStatuses": [{"name": "model-download", "ready": true, "restartCount": 0,
      "containerID": "containerd://%s", "state": {"terminated": {"exitCode": 0}}}],
    "containerStatuses": [{"name": %q, "ready": true, "restartCount": 0, "image": "vllm/vllm-openai:v0.9.0",
      "containerID": "containerd://%s", "started": true, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]
  }
}`, name, ns, uid, container, hexInit, container, id)
}

// fakeKubelet serves GET /pods over TLS and counts requests.
type fakeKubelet struct {
	srv      *httptest.Server
	requests atomic.Int32
	down     atomic.Bool
	mu       sync.Mutex
	items    []string
	auth     string
}

func newFakeKubelet(t *testing.T, items ...string) *fakeKubelet {
	k := &fakeKubelet{items: items}
	k.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.requests.Add(1)
		k.mu.Lock()
		defer k.mu.Unlock()
		k.auth = r.Header.Get("Authorization")
		if r.URL.Path != "/pods" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		if k.down.Load() {
			http.Error(w, "kubelet is restarting", http.StatusServiceUnavailable)
			return
		}
		body := `{"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [`
		for i, it := range k.items {
			if i > 0 {
				body += ","
			}
			body += it
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body+"]}")
	}))
	k.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // rejected handshakes are expected in TLS tests
	k.srv.StartTLS()
	t.Cleanup(k.srv.Close)
	return k
}

func (k *fakeKubelet) addPod(item string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.items = append(k.items, item)
}

func (k *fakeKubelet) lastAuth() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.auth
}

// fakeProc builds a ProcRoot with one <pid>/cgroup file per entry.
func fakeProc(t *testing.T, cgroups map[int]string) string {
	root := t.TempDir()
	for pid, content := range cgroups {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// containerdV2 is a burstable pod's container under the systemd driver,
// which escapes the pod UID's dashes as underscores.
func containerdV2(podUID, id string) string {
	return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
		strings.ReplaceAll(podUID, "-", "_") + ".slice/cri-containerd-" + id + ".scope\n"
}

var testProcs = map[int]string{
	100: containerdV2(uid, hexA),
	101: containerdV2(uid, hexInit),
	102: "0::/user.slice/user-1000.slice/session-2.scope\n",
	103: "12:memory:/kubepods/burstable/pod" + uid + "/" + hexA + "\n",
	200: containerdV2(uid2, hexB),
}

// clock is a settable time source for the cache logic.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

type env struct {
	k *fakeKubelet
	r *Resolver
	c *clock
}

func newEnv(t *testing.T, cfg Config) env {
	k := newFakeKubelet(t, podJSON("vllm-0", "inference", uid, "server", hexA))
	cfg.KubeletURL = k.srv.URL
	cfg.ProcRoot = fakeProc(t, testProcs)
	cfg.Client = k.srv.Client()
	if cfg.TokenFile == "" {
		cfg.TokenFile = filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(cfg.TokenFile, []byte("tok-123\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewResolver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	r.now = c.now
	return env{k, r, c}
}

func (e env) wantRequests(t *testing.T, n int32) {
	t.Helper()
	if got := e.k.requests.Load(); got != n {
		t.Fatalf("kubelet requests = %d, want %d", got, n)
	}
}
