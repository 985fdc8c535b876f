package k8smeta

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/specprobe/specprobe/internal/safefile"
)

const (
	defaultTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	defaultCAFile    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	defaultRefresh   = 10 * time.Second
	clientTimeout    = 5 * time.Second
	// missInterval bounds refetches for pods not yet in the cache: a burst of
	// new processes, or a pid whose pod the kubelet never lists, must not
	// turn into a request per Lookup.
	missInterval = time.Second
)

// Config says where to find the kubelet and the process tree; zero fields take defaults.
type Config struct {
	NodeName           string        // default: $NODE_NAME (downward API)
	KubeletURL         string        // e.g. https://10.0.0.5:10250; "" = no kubelet lookups. Default $KUBELET_URL, else https://$NODE_IP:10250 when $NODE_IP is set
	TokenFile          string        // bearer token, default the service-account token (missing file: no Authorization header); NoToken: never send one
	CAFile             string        // default the service-account ca.crt if it exists
	InsecureSkipVerify bool          // do not verify the kubelet's serving certificate: only where it cannot be (self-signed, no CA to give)
	Refresh            time.Duration // min interval between kubelet /pods fetches, default 10s
	ProcRoot           string        // default "/proc"
	Client             *http.Client  // tests; default built from the TLS settings, 5s timeout
}

// NoToken as TokenFile sends no Authorization header: what an http:// URL
// (the kubelet's unauthenticated read-only port) requires.
const NoToken = "none"

// Resolver maps pids to Info, caching the kubelet's pod list.
type Resolver struct {
	nodeName   string
	kubeletURL string
	tokenFile  string
	refresh    time.Duration
	procRoot   string
	client     *http.Client
	now        func() time.Time // injectable so tests need not sleep

	// mu is held across the kubelet request so that concurrent lookups of a
	// new pod share one fetch instead of each issuing their own.
	mu      sync.Mutex
	pods    map[string]*pod // by UID
	fetched time.Time       // last attempt, failed ones included, so a down kubelet is not hammered

	// errMu is separate from mu so that Err never waits on a slow kubelet.
	errMu   sync.Mutex
	lastErr error
}

// NewResolver applies the defaults. It fails only for a malformed KubeletURL
// or an explicitly configured CAFile that cannot be used.
func NewResolver(cfg Config) (*Resolver, error) {
	r := &Resolver{
		nodeName:  cfg.NodeName,
		tokenFile: cfg.TokenFile,
		refresh:   cfg.Refresh,
		procRoot:  cfg.ProcRoot,
		client:    cfg.Client,
		now:       time.Now,
	}
	if r.nodeName == "" {
		r.nodeName = os.Getenv("NODE_NAME")
	}
	if r.tokenFile == "" {
		r.tokenFile = defaultTokenFile
	}
	if r.refresh <= 0 {
		r.refresh = defaultRefresh
	}
	if r.procRoot == "" {
		r.procRoot = "/proc"
	}
	u, err := kubeletURL(cfg.KubeletURL)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(u, "http://") && r.tokenFile != NoToken {
		return nil, fmt.Errorf("k8smeta: kubelet URL %s is plain http://: the service-account token would cross the network in clear; use https:// (port 10250), or token_file: %s for a kubelet port that needs none", u, NoToken)
	}
	r.kubeletURL = u
	if r.client == nil {
		if r.client, err = newClient(cfg.CAFile, cfg.InsecureSkipVerify); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func kubeletURL(raw string) (string, error) {
	if raw == "" {
		raw = os.Getenv("KUBELET_URL")
	}
	if raw == "" {
		if ip := os.Getenv("NODE_IP"); ip != "" {
			raw = "https://" + net.JoinHostPort(ip, "10250")
		}
	}
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("k8smeta: kubelet URL %q: %w", raw, err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("k8smeta: kubelet URL %q: want http(s)://host[:port]", raw)
	}
	return strings.TrimSuffix(raw, "/"), nil
}

func newClient(caFile string, insecure bool) (*http.Client, error) {
	explicit := caFile != ""
	if !explicit {
		caFile = defaultCAFile
	}
	tlsCfg := &tls.Config{InsecureSkipVerify: insecure}
	pem, err := safefile.ReadRegular(caFile, 1<<20)
	switch {
	case err == nil:
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			if explicit {
				return nil, fmt.Errorf("k8smeta: CA file %s: no PEM certificates", caFile)
			}
		} else {
			tlsCfg.RootCAs = pool
		}
	case explicit:
		return nil, fmt.Errorf("k8smeta: CA file: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	// The kubelet is node-local: a cluster-wide HTTPS_PROXY must not capture it.
	tr.Proxy = nil
	return &http.Client{Transport: tr, Timeout: clientTimeout}, nil
}

// Lookup never fails: it fills what it can from ProcRoot/PID/cgroup and, for
// a pod on a configured kubelet, from the kubelet's pod list.
func (r *Resolver) Lookup(ctx context.Context, pid int) Info {
	info := Info{NodeName: r.nodeName}
	data, err := safefile.ReadRegular(filepath.Join(r.procRoot, strconv.Itoa(pid), "cgroup"), 64<<10)
	if err != nil {
		return info // exited, or not ours to read: nothing more is knowable
	}
	info.ContainerID, info.Runtime, info.PodUID = ParseCgroup(data)
	if info.PodUID == "" || r.kubeletURL == "" {
		return info
	}
	p := r.pod(ctx, info.PodUID, info.ContainerID)
	if p == nil {
		return info
	}
	info.PodName, info.Namespace = p.Metadata.Name, p.Metadata.Namespace
	if info.NodeName == "" {
		info.NodeName = p.Spec.NodeName
	}
	if name, rt := p.container(info.ContainerID); name != "" {
		info.ContainerName = name
		if info.Runtime == "" { // cgroupfs paths do not name the runtime; the API does
			info.Runtime = rt
		}
	}
	return info
}

// pod returns the cached pod, refetching when the cache is older than
// refresh, or (rate-limited) when the pod or its container is not in it yet:
// a just-started pod or a restarted container should not wait a full refresh.
func (r *Resolver) pod(ctx context.Context, uid, containerID string) *pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pods[uid]
	miss := p == nil
	if !miss && containerID != "" {
		name, _ := p.container(containerID)
		miss = name == ""
	}
	now := r.now()
	age := now.Sub(r.fetched)
	if age < r.refresh && (!miss || age < missInterval) {
		return p
	}
	r.fetched = now
	pods, err := r.fetchPods(ctx)
	r.setErr(err)
	if err != nil {
		return p // keep stale data: a kubelet blip should not strip known names
	}
	r.pods = pods
	return pods[uid]
}

// Err returns the last kubelet error, nil when the last fetch worked.
func (r *Resolver) Err() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.lastErr
}

func (r *Resolver) setErr(err error) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	r.lastErr = err
}
