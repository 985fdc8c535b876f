package deploy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/specprobe/specprobe/k8smeta"
)

// saUser is the identity the kubelet gives the DaemonSet's token.
const saUser = "system:serviceaccount:specprobe:specprobe"

// attributes is what the kubelet asks the authorizer for a request: the
// verb from the method, and the resource nodes with the subresource the
// path maps to. With fine-grained kubelet authorization (Kubernetes 1.33+)
// /pods is nodes/pods, checked before nodes/proxy; every path without a
// subresource of its own (exec, run, attach, portForward, containerLogs)
// is nodes/proxy.
func attributes(r *http.Request) (verb string, subresources []string) {
	verb = "get"
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		verb = "create"
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch first {
	case "pods":
		return verb, []string{"pods", "proxy"}
	case "healthz":
		return verb, []string{"healthz", "proxy"}
	case "configz":
		return verb, []string{"configz", "proxy"}
	case "metrics":
		return verb, []string{"metrics"}
	case "stats":
		return verb, []string{"stats"}
	case "logs":
		return verb, []string{"log"}
	}
	return verb, []string{"proxy"}
}

// allowed evaluates RBAC the way the API server's authorizer does for the
// rules bound to user: a rule matches the core group, the verb, and the
// resource "nodes/<subresource>" (or a wildcard).
func allowed(m *manifest, user, verb, subresource string) bool {
	bound := false
	for _, s := range m.binding.Subjects {
		if s.Kind == rbacv1.ServiceAccountKind && "system:serviceaccount:"+s.Namespace+":"+s.Name == user {
			bound = true
		}
	}
	if !bound || m.binding.RoleRef.Name != m.role.Name {
		return false
	}
	for _, r := range m.role.Rules {
		if (slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) &&
			(slices.Contains(r.Resources, "nodes/"+subresource) || slices.Contains(r.Resources, "nodes/*") || slices.Contains(r.Resources, "*")) {
			return true
		}
	}
	return false
}

// fakeKubelet serves /pods over TLS and authorizes every request with the
// manifest's RBAC, the way a kubelet does (authentication by bearer token,
// authorization by SubjectAccessReview against those rules).
func fakeKubelet(t *testing.T, m *manifest, token string, cert ...tls.Certificate) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb, subs := attributes(r)
		if !slices.ContainsFunc(subs, func(sub string) bool { return allowed(m, saUser, verb, sub) }) {
			http.Error(w, "Forbidden (user="+saUser+", verb="+verb+", resource=nodes, subresource="+subs[0]+")", http.StatusForbidden)
			return
		}
		if r.URL.Path != "/pods" {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"vllm-0","namespace":"inference","uid":"3f0d7b4e-1c2a-4b5d-9e6f-7a8b9c0d1e2f"},
"spec":{"nodeName":"gpu-1"},"status":{"containerStatuses":[{"name":"server","containerID":"containerd://`+strings.Repeat("a", 64)+`"}]}}]}`)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if len(cert) > 0 {
		srv.TLS = &tls.Config{Certificates: cert}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// resolverFor is the daemon's pod-name lookup, configured as the shipped
// config configures it: the token file and a CA (ca's certificate),
// verified TLS.
func resolverFor(t *testing.T, srv, ca *httptest.Server, token string) *k8smeta.Resolver {
	dir := t.TempDir()
	tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	proc := filepath.Join(dir, "proc", "100")
	if err := os.MkdirAll(proc, 0o755); err != nil {
		t.Fatal(err)
	}
	cgroup := "0::/kubepods.slice/kubepods-pod3f0d7b4e_1c2a_4b5d_9e6f_7a8b9c0d1e2f.slice/cri-containerd-" + strings.Repeat("a", 64) + ".scope\n"
	if err := os.WriteFile(filepath.Join(proc, "cgroup"), []byte(cgroup), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := k8smeta.NewResolver(k8smeta.Config{KubeletURL: srv.URL, TokenFile: tokenFile, CAFile: caFile, ProcRoot: filepath.Join(dir, "proc")})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPodNamesWithManifestPermissions: with exactly the RBAC the manifest
// grants, the daemon's lookup names the pod through a kubelet that
// enforces it; the same token is refused exec, run and the other proxy
// paths; without nodes/pods there are no names.
func TestPodNamesWithManifestPermissions(t *testing.T) {
	m := loadManifest(t)
	const token = "sa-token"
	srv := fakeKubelet(t, m, token)
	r := resolverFor(t, srv, srv, token)
	info := r.Lookup(context.Background(), 100)
	if info.PodName != "vllm-0" || info.Namespace != "inference" || info.ContainerName != "server" || r.Err() != nil {
		t.Fatalf("Lookup = %+v, Err %v: want pod vllm-0/inference with the manifest's permissions", info, r.Err())
	}
	for _, req := range []struct{ method, path string }{
		{"POST", "/exec/inference/vllm-0/server?command=sh"},
		{"POST", "/run/inference/vllm-0/server"},
		{"GET", "/attach/inference/vllm-0/server"},
		{"GET", "/containerLogs/inference/vllm-0/server"},
		{"GET", "/configz"},
		{"GET", "/metrics"},
	} {
		rq, _ := http.NewRequest(req.method, srv.URL+req.path, nil)
		rq.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s with the daemon's token: %s, want 403", req.method, req.path, resp.Status)
		}
	}

	// The test can fail: without nodes/pods the kubelet refuses /pods.
	m.role.Rules = nil
	denying := fakeKubelet(t, m, token)
	r = resolverFor(t, denying, denying, token)
	if info := r.Lookup(context.Background(), 100); info.PodName != "" || r.Err() == nil || !strings.Contains(r.Err().Error(), "403") {
		t.Errorf("without nodes/pods: Lookup = %+v, Err %v; want no name and a 403", info, r.Err())
	}
}

// TestKubeletCertificateVerified: the lookup refuses a kubelet whose
// certificate the configured CA does not sign (and so never sends it the
// token).
func TestKubeletCertificateVerified(t *testing.T) {
	m := loadManifest(t)
	const token = "sa-token"
	trusted := fakeKubelet(t, m, token)
	other := fakeKubelet(t, m, token, selfSigned(t))
	r := resolverFor(t, other, trusted, token)
	if info := r.Lookup(context.Background(), 100); info.PodName != "" || r.Err() == nil || !strings.Contains(r.Err().Error(), "certificate") {
		t.Errorf("through a kubelet the CA does not vouch for: Lookup = %+v, Err %v; want a certificate error", info, r.Err())
	}
}

// selfSigned makes a certificate for 127.0.0.1 that no CA here signed.
func selfSigned(t *testing.T) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubelet"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
