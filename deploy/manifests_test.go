package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/specprobe/specprobe/daemon"
)

const (
	manifestFile = "kubernetes/specprobe.yaml"
	namespace    = "specprobe"
	configKey    = "config.yaml"
)

// wantCaps are the capabilities the daemon adds after dropping ALL; each must
// say why in a comment next to it.
var wantCaps = []corev1.Capability{"BPF", "PERFMON", "SYS_PTRACE", "DAC_READ_SEARCH"}

// wantKinds is the order of the objects in the manifest: each is created
// before what refers to it.
var wantKinds = []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "NetworkPolicy", "DaemonSet"}

// wantGrants is everything the ClusterRole may grant: get on nodes/pods,
// the kubelet's /pods under fine-grained kubelet authorization.
var wantGrants = []string{"get nodes/pods"}

// manifest is specprobe.yaml decoded into the Kubernetes API types.
type manifest struct {
	kinds     []string
	namespace *corev1.Namespace
	sa        *corev1.ServiceAccount
	role      *rbacv1.ClusterRole
	binding   *rbacv1.ClusterRoleBinding
	config    *corev1.ConfigMap
	netpol    *networkingv1.NetworkPolicy
	ds        *appsv1.DaemonSet
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// splitDocs splits a multi-document YAML stream, dropping documents that hold
// only comments or blank lines.
func splitDocs(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range docSep.Split(string(data), -1) {
		empty := true
		for _, line := range strings.Split(d, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				empty = false
				break
			}
		}
		if !empty {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// decodeManifest decodes every document strictly (unknown or duplicate fields
// are errors) into the API type its apiVersion and kind name; other kinds are
// errors, as is a kind given twice.
func decodeManifest(data []byte) (*manifest, error) {
	m := &manifest{}
	for i, doc := range splitDocs(data) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %v", i+1, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 Namespace":
			m.namespace, obj = new(corev1.Namespace), &m.namespace
		case "v1 ServiceAccount":
			m.sa, obj = new(corev1.ServiceAccount), &m.sa
		case "rbac.authorization.k8s.io/v1 ClusterRole":
			m.role, obj = new(rbacv1.ClusterRole), &m.role
		case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
			m.binding, obj = new(rbacv1.ClusterRoleBinding), &m.binding
		case "v1 ConfigMap":
			m.config, obj = new(corev1.ConfigMap), &m.config
		case "networking.k8s.io/v1 NetworkPolicy":
			m.netpol, obj = new(networkingv1.NetworkPolicy), &m.netpol
		case "apps/v1 DaemonSet":
			m.ds, obj = new(appsv1.DaemonSet), &m.ds
		default:
			return nil, fmt.Errorf("document %d: unexpected object %q %q", i+1, tm.APIVersion, tm.Kind)
		}
		if slices.Contains(m.kinds, tm.Kind) {
			return nil, fmt.Errorf("document %d: a second %s", i+1, tm.Kind)
		}
		if err := decodeStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %v", i+1, tm.Kind, err)
		}
		m.kinds = append(m.kinds, tm.Kind)
	}
	return m, nil
}

// decodeStrict decodes as the API server's strict field validation does:
// field names are case-sensitive (encoding/json's are not, so "hostpid" would
// pass as hostPID), and unknown or duplicate fields are errors.
func decodeStrict(doc []byte, obj any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func loadManifest(t *testing.T) *manifest {
	t.Helper()
	data, err := os.ReadFile(manifestFile)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeManifest(data)
	if err != nil {
		t.Fatalf("%s: %v", manifestFile, err)
	}
	if !slices.Equal(m.kinds, wantKinds) {
		t.Fatalf("%s: objects %v, want %v in that order", manifestFile, m.kinds, wantKinds)
	}
	return m
}

// problems collects policy violations.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// policy returns every way m breaks the deployment policy.
func policy(m *manifest) []string {
	var p problems
	if m.namespace.Name != namespace {
		p.add("namespace %q, want %q", m.namespace.Name, namespace)
	}
	for _, o := range []metav1.ObjectMeta{m.sa.ObjectMeta, m.config.ObjectMeta, m.netpol.ObjectMeta, m.ds.ObjectMeta} {
		if o.Namespace != namespace {
			p.add("%s is in namespace %q, want %q", o.Name, o.Namespace, namespace)
		}
	}
	rbacPolicy(&p, m)
	configPolicy(&p, m)
	daemonSetPolicy(&p, m)
	networkPolicy(&p, m)
	return p
}

// rbacPolicy: exactly wantGrants (no nodes/proxy, which is exec into every
// container through the kubelet; no API-server reads), bound to the
// DaemonSet's service account.
func rbacPolicy(p *problems, m *manifest) {
	granted := map[string]bool{}
	for i, r := range m.role.Rules {
		if !slices.Equal(r.APIGroups, []string{""}) || len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			p.add("ClusterRole rule %d: want only the core API group, no resourceNames or nonResourceURLs: %+v", i, r)
		}
		for _, v := range r.Verbs {
			for _, res := range r.Resources {
				g := v + " " + res
				if !slices.Contains(wantGrants, g) {
					p.add("ClusterRole rule %d grants %q: want only %v", i, g, wantGrants)
				}
				granted[g] = true
			}
		}
	}
	for _, g := range wantGrants {
		if !granted[g] {
			p.add("ClusterRole does not grant %s", g)
		}
	}
	b := m.binding
	if b.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: m.role.Name}) {
		p.add("ClusterRoleBinding roleRef %+v, want ClusterRole %q", b.RoleRef, m.role.Name)
	}
	want := rbacv1.Subject{Kind: "ServiceAccount", Name: m.sa.Name, Namespace: m.sa.Namespace}
	if len(b.Subjects) != 1 || b.Subjects[0] != want {
		p.add("ClusterRoleBinding subjects %+v, want only %+v", b.Subjects, want)
	}
}

// networkPolicy: the daemon's pods take ingress only on the metrics port,
// only from the pods a selector names (not from everywhere).
func networkPolicy(p *problems, m *manifest) {
	np := m.netpol
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(m.ds.Spec.Template.Labels)) {
		p.add("NetworkPolicy selects %v, not the daemon's pods %v", np.Spec.PodSelector, m.ds.Spec.Template.Labels)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		p.add("NetworkPolicy policyTypes %v: want Ingress", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) == 0 {
		p.add("NetworkPolicy has no ingress rule: Prometheus could not scrape")
	}
	for i, r := range np.Spec.Ingress {
		if len(r.From) == 0 {
			p.add("NetworkPolicy ingress rule %d allows every source", i)
		}
		for _, f := range r.From {
			if f.IPBlock != nil || (f.NamespaceSelector != nil && len(f.NamespaceSelector.MatchLabels)+len(f.NamespaceSelector.MatchExpressions) == 0) {
				p.add("NetworkPolicy ingress rule %d: source %+v is not a named set of pods", i, f)
			}
		}
		if len(r.Ports) == 0 {
			p.add("NetworkPolicy ingress rule %d allows every port", i)
		}
		for _, port := range r.Ports {
			if port.Port == nil || port.Port.String() != "metrics" && port.Port.IntValue() != int(metricsPort(m)) {
				p.add("NetworkPolicy ingress rule %d opens port %v, want only the metrics port", i, port.Port)
			}
		}
	}
}

func metricsPort(m *manifest) int32 {
	for _, c := range m.ds.Spec.Template.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == "metrics" {
				return cp.ContainerPort
			}
		}
	}
	return 0
}

// configPolicy: the sample config.yaml has only the daemon's keys, with
// values the daemon accepts.
func configPolicy(p *problems, m *manifest) {
	text, ok := m.config.Data[configKey]
	if !ok {
		p.add("ConfigMap %s has no %s", m.config.Name, configKey)
		return
	}
	// The daemon's own parser: unknown keys and bad values are errors there.
	cfg, err := daemon.ParseConfig([]byte(text), configKey)
	if err != nil {
		p.add("%s does not decode as the daemon's config: %v", configKey, err)
		return
	}
	if strings.Contains(text, "${") || strings.Contains(text, "$(") {
		p.add("%s refers to a variable; the daemon does not expand them", configKey)
	}
	if len(cfg.Exporters) == 0 {
		p.add("%s: no exporters: spans would only be counted", configKey)
	}
	if cfg.Kubelet.InsecureSkipVerify {
		p.add("%s: kubelet.insecure_skip_verify is true: the kubelet's certificate must be verified", configKey)
	}
	if strings.HasPrefix(cfg.Kubelet.URL, "http://") {
		p.add("%s: kubelet.url %q is plain http://: the token would cross the network in clear", configKey, cfg.Kubelet.URL)
	}
	if cfg.CommandLine == "full" {
		p.add("%s: command_line full exports secrets given as flags", configKey)
	}
	if lim := memoryLimit(m); lim > 0 {
		if n, err := goSize(cfg.MemoryLimit); err != nil || n <= 0 || n >= lim {
			p.add("%s: memory_limit %q must be set and under limits.memory (%d bytes)", configKey, cfg.MemoryLimit, lim)
		}
	}
}

func memoryLimit(m *manifest) int64 {
	if cs := m.ds.Spec.Template.Spec.Containers; len(cs) > 0 {
		return cs[0].Resources.Limits.Memory().Value()
	}
	return 0
}

// goSize reads a Go memory limit as GOMEMLIMIT spells it (and the daemon's
// memory_limit): bytes with an optional B, KiB, MiB, GiB or TiB suffix.
func goSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err
}

// daemonSetPolicy: the pod's privileges, probes, resources and wiring.
func daemonSetPolicy(p *problems, m *manifest) {
	ds := m.ds
	pod := ds.Spec.Template.Spec
	if !pod.HostPID {
		p.add("hostPID is not true: the daemon would not see the node's processes")
	}
	if pod.HostNetwork || pod.HostIPC {
		p.add("hostNetwork/hostIPC set: not needed")
	}
	if pod.ServiceAccountName != m.sa.Name {
		p.add("serviceAccountName %q, want %q", pod.ServiceAccountName, m.sa.Name)
	}
	if pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken {
		p.add("automountServiceAccountToken false: the daemon needs the token for the kubelet")
	}
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds != 30 {
		p.add("terminationGracePeriodSeconds %v, want 30", pod.TerminationGracePeriodSeconds)
	}
	if u := ds.Spec.UpdateStrategy; u.Type != appsv1.RollingUpdateDaemonSetStrategyType || u.RollingUpdate == nil ||
		u.RollingUpdate.MaxUnavailable == nil || u.RollingUpdate.MaxUnavailable.String() != "1" {
		p.add("updateStrategy %+v, want RollingUpdate with maxUnavailable 1", u)
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		p.add("selector %v does not select the pod template's labels %v (%v)", ds.Spec.Selector, ds.Spec.Template.Labels, err)
	}
	if !slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool {
		return t.Key == "nvidia.com/gpu" && t.Operator == corev1.TolerationOpExists &&
			(t.Effect == "" || t.Effect == corev1.TaintEffectNoSchedule)
	}) {
		p.add("no toleration for nvidia.com/gpu (Exists, NoSchedule): GPU nodes would be skipped")
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
		if v.HostPath != nil {
			p.add("volume %s is a hostPath: none is needed", v.Name)
		}
	}
	all := slices.Concat(pod.InitContainers, pod.Containers)
	if len(pod.Containers) == 0 {
		p.add("no containers")
		return
	}
	for _, c := range all {
		containerPolicy(p, c)
		if c.Image != all[0].Image {
			p.add("container %s image %q differs from %q", c.Name, c.Image, all[0].Image)
		}
	}

	c := pod.Containers[0]
	if c.Image == "" {
		p.add("container %s has no image", c.Name)
	}
	if len(c.Command) > 0 {
		p.add("container %s sets command %v: the image's ENTRYPOINT is specprobe", c.Name, c.Command)
	}
	if !slices.Contains(c.Args, "daemon") || c.Args[0] != "daemon" {
		p.add("container %s args %v: want the daemon subcommand first", c.Name, c.Args)
	}
	var port int32
	for _, cp := range c.Ports {
		if cp.Name == "metrics" {
			port = cp.ContainerPort
		}
	}
	if port == 0 {
		p.add("container %s has no port named metrics", c.Name)
	}
	if pod.HostNetwork {
		return
	}

	// --listen (everything, /targets included) on loopback; --metrics-listen
	// on the pod IP, where the probes and Prometheus connect.
	if host, _, err := net.SplitHostPort(flagValue(c.Args, "--listen")); err != nil || !isLoopback(host) {
		p.add("container %s: --listen %q: want a loopback address (/targets names what is traced)", c.Name, flagValue(c.Args, "--listen"))
	}
	ml := flagValue(c.Args, "--metrics-listen")
	if host, mp, err := net.SplitHostPort(ml); err != nil {
		p.add("container %s: --metrics-listen %q: %v (the probes and Prometheus need the pod IP)", c.Name, ml, err)
	} else {
		if mp != strconv.Itoa(int(port)) {
			p.add("--metrics-listen port %s is not the metrics port %d", mp, port)
		}
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return "$("+e.Name+")" == host && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP"
		}) {
			p.add("--metrics-listen host %q is not $(POD_IP) from status.podIP: it must be the pod IP only", host)
		}
	}
	for _, pr := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"livenessProbe", c.LivenessProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			p.add("container %s has no httpGet %s", c.Name, pr.name)
			continue
		}
		g := pr.probe.HTTPGet
		if g.Path != pr.path || (g.Port.String() != "metrics" && g.Port.IntValue() != int(port)) {
			p.add("%s is GET %s on port %s, want %s on the metrics port", pr.name, g.Path, g.Port.String(), pr.path)
		}
	}
	a := ds.Spec.Template.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != strconv.Itoa(int(port)) || a["prometheus.io/path"] != "/metrics" {
		p.add("pod annotations %v: want prometheus.io/scrape true, port %d, path /metrics", a, port)
	}

	// The ConfigMap is mounted where --config points.
	cfgPath := flagValue(c.Args, "--config")
	if cfgPath == "" {
		p.add("container %s: no --config", c.Name)
	}
	mountedConfig := false
	for _, vm := range c.VolumeMounts {
		v, ok := volumes[vm.Name]
		if !ok {
			p.add("mount %s has no volume", vm.Name)
			continue
		}
		if v.ConfigMap != nil && v.ConfigMap.Name == m.config.Name && path.Join(vm.MountPath, configKey) == cfgPath {
			mountedConfig = vm.ReadOnly
		}
	}
	if !mountedConfig {
		p.add("ConfigMap %s is not mounted read-only so that --config %q is its %s", m.config.Name, cfgPath, configKey)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool {
		return vm.MountPath == "/tmp" && volumes[vm.Name].EmptyDir != nil
	}) {
		p.add("no emptyDir at /tmp: the root filesystem is read-only")
	}

	// Environment from the downward API.
	fieldRefs := map[string]string{"NODE_NAME": "spec.nodeName", "NODE_IP": "status.hostIP", "POD_IP": "status.podIP"}
	for name, field := range fieldRefs {
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == field
		}) {
			p.add("env %s is not from the downward API field %s", name, field)
		}
	}
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		if e.ValueFrom != nil {
			if r := e.ValueFrom.ResourceFieldRef; r == nil || r.Resource != "limits.memory" {
				p.add("GOMEMLIMIT comes from %+v, want limits.memory or a value under it", e.ValueFrom)
			}
		} else if n, err := goSize(e.Value); err != nil || n <= 0 || n >= memoryLimit(m) {
			p.add("GOMEMLIMIT %q is not a size under limits.memory (%d bytes)", e.Value, memoryLimit(m))
		}
	}
}

// containerPolicy: drop ALL, add exactly wantCaps, nothing privileged, a
// read-only root, uid 0, the runtime's default seccomp profile, AppArmor
// unconfined, bounded resources.
func containerPolicy(p *problems, c corev1.Container) {
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		p.add("container %s has no securityContext.capabilities", c.Name)
		return
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		p.add("container %s drops %v, want [ALL]", c.Name, sc.Capabilities.Drop)
	}
	if got := slices.Sorted(slices.Values(sc.Capabilities.Add)); !slices.Equal(got, slices.Sorted(slices.Values(wantCaps))) {
		p.add("container %s adds %v, want exactly %v", c.Name, sc.Capabilities.Add, wantCaps)
	}
	if sc.Privileged == nil || *sc.Privileged {
		p.add("container %s: privileged must be set to false", c.Name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		p.add("container %s: allowPrivilegeEscalation must be false", c.Name)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		p.add("container %s: readOnlyRootFilesystem must be true", c.Name)
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 || sc.RunAsNonRoot != nil && *sc.RunAsNonRoot {
		p.add("container %s: runAsUser must be 0 (added capabilities are effective only for root)", c.Name)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		p.add("container %s: seccompProfile must be RuntimeDefault (it allows bpf and perf_event_open with CAP_BPF and CAP_PERFMON)", c.Name)
	}
	if sc.AppArmorProfile == nil || sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined {
		p.add("container %s: appArmorProfile must be Unconfined", c.Name)
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := c.Resources.Requests[res]
		lim, hasLim := c.Resources.Limits[res]
		if !hasReq || !hasLim || req.IsZero() || req.Cmp(lim) > 0 {
			p.add("container %s: %s request %v and limit %v must both be set, request <= limit", c.Name, res, req.String(), lim.String())
		}
	}
}

// flagValue finds --name=VALUE or --name VALUE in args.
func flagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

func TestManifestDecodesStrictly(t *testing.T) {
	loadManifest(t)
}

func TestManifestPolicy(t *testing.T) {
	for _, p := range policy(loadManifest(t)) {
		t.Error(p)
	}
}

// TestPolicyCatchesViolations breaks the real manifest in ways the policy
// must notice, so that the policy test can fail.
func TestPolicyCatchesViolations(t *testing.T) {
	sc := func(m *manifest) *corev1.SecurityContext {
		return m.ds.Spec.Template.Spec.Containers[0].SecurityContext
	}
	cases := []struct {
		name   string
		break_ func(m *manifest)
		want   string
	}{
		{"no hostPID", func(m *manifest) { m.ds.Spec.Template.Spec.HostPID = false }, "hostPID"},
		{"extra capability", func(m *manifest) { sc(m).Capabilities.Add = append(sc(m).Capabilities.Add, "SYS_ADMIN") }, "adds"},
		{"missing capability", func(m *manifest) { sc(m).Capabilities.Add = sc(m).Capabilities.Add[1:] }, "adds"},
		{"no drop", func(m *manifest) { sc(m).Capabilities.Drop = nil }, "drops"},
		{"privileged", func(m *manifest) { sc(m).Privileged = new(bool); *sc(m).Privileged = true }, "privileged"},
		{"writable root", func(m *manifest) { sc(m).ReadOnlyRootFilesystem = nil }, "readOnlyRootFilesystem"},
		{"escalation", func(m *manifest) { sc(m).AllowPrivilegeEscalation = nil }, "allowPrivilegeEscalation"},
		{"seccomp", func(m *manifest) { sc(m).SeccompProfile = nil }, "seccompProfile"},
		{"seccomp unconfined", func(m *manifest) { sc(m).SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined }, "RuntimeDefault"},
		{"no memory limit", func(m *manifest) {
			delete(m.ds.Spec.Template.Spec.Containers[0].Resources.Limits, corev1.ResourceMemory)
		}, "memory request"},
		{"no toleration", func(m *manifest) { m.ds.Spec.Template.Spec.Tolerations = nil }, "nvidia.com/gpu"},
		{"liveness path", func(m *manifest) { m.ds.Spec.Template.Spec.Containers[0].LivenessProbe.HTTPGet.Path = "/" }, "livenessProbe"},
		{"listen on every address", func(m *manifest) { setArg(m, "--listen", "0.0.0.0:9464") }, "want a loopback address"},
		{"metrics on every address", func(m *manifest) { setArg(m, "--metrics-listen", "0.0.0.0:9464") }, "not $(POD_IP)"},
		{"no metrics listener", func(m *manifest) { setArg(m, "--metrics-listen", "") }, "--metrics-listen"},
		{"network policy open to all", func(m *manifest) { m.netpol.Spec.Ingress[0].From = nil }, "allows every source"},
		{"network policy all ports", func(m *manifest) { m.netpol.Spec.Ingress[0].Ports = nil }, "allows every port"},
		{"network policy other pods", func(m *manifest) { m.netpol.Spec.PodSelector.MatchLabels = map[string]string{"app": "x"} }, "NetworkPolicy selects"},
		{"skip verify", func(m *manifest) {
			m.config.Data[configKey] = strings.Replace(m.config.Data[configKey], "kubelet:\n", "kubelet:\n  insecure_skip_verify: true\n", 1)
		}, "insecure_skip_verify"},
		{"command line exported", func(m *manifest) {
			m.config.Data[configKey] = strings.Replace(m.config.Data[configKey], "command_line: off", "command_line: full", 1)
		}, "command_line full"},
		{"no daemon arg", func(m *manifest) { m.ds.Spec.Template.Spec.Containers[0].Args[0] = "attach" }, "daemon subcommand"},
		{"config not mounted", func(m *manifest) { m.ds.Spec.Template.Spec.Containers[0].VolumeMounts[0].MountPath = "/etc/other" }, "not mounted"},
		{"two images", func(m *manifest) {
			pod := &m.ds.Spec.Template.Spec
			side := *pod.Containers[0].DeepCopy()
			side.Name, side.Image = "side", "busybox"
			pod.Containers = append(pod.Containers, side)
		}, "differs"},
		{"rbac list pods", func(m *manifest) {
			m.role.Rules = append(m.role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
		}, `grants "list pods"`},
		{"rbac nodes/proxy", func(m *manifest) { m.role.Rules[0].Resources = append(m.role.Rules[0].Resources, "nodes/proxy") }, `grants "get nodes/proxy"`},
		{"rbac no nodes/pods", func(m *manifest) { m.role.Rules[0].Resources = []string{"nodes"} }, "does not grant get nodes/pods"},
		{"unknown config key", func(m *manifest) { m.config.Data[configKey] += "\nbogus: 1\n" }, "field bogus not found"},
		{"config type", func(m *manifest) {
			m.config.Data[configKey] = strings.Replace(m.config.Data[configKey], "max_processes: 16", "max_processes: many", 1)
		}, "does not decode"},
		{"memory_limit over the limit", func(m *manifest) {
			m.config.Data[configKey] = strings.Replace(m.config.Data[configKey], "memory_limit: 200MiB", "memory_limit: 1GiB", 1)
		}, "memory_limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := loadManifest(t)
			tc.break_(m)
			got := policy(m)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("policy did not report %q; it reported %q", tc.want, got)
			}
		})
	}
}

// setArg replaces the container's flag name (or removes it, value "").
func setArg(m *manifest, name, value string) {
	c := &m.ds.Spec.Template.Spec.Containers[0]
	c.Args = slices.DeleteFunc(slices.Clone(c.Args), func(a string) bool { return a == name || strings.HasPrefix(a, name+"=") })
	if value != "" {
		c.Args = append(c.Args, name+"="+value)
	}
}

// TestDecodeRejects checks the strict decoding on small documents.
func TestDecodeRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":    "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      hostPid: true\n",
		"unknown kind":     "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n",
		"wrong apiVersion": "apiVersion: extensions/v1beta1\nkind: DaemonSet\nmetadata: {name: x}\n",
		"duplicate field":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\ndata: {c: d}\n",
		"miscased field":   "apiVersion: v1\nkind: Namespace\nmetadata: {Name: x}\n",
		"wrong field type": "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: x}\nautomountServiceAccountToken: yes please\n",
		"same kind twice":  "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n",
	} {
		_, err := decodeManifest([]byte(doc))
		if err == nil {
			t.Errorf("%s: decoded without error", name)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
	if docs := splitDocs([]byte("# only a comment\n---\na: 1\n---\n\n")); len(docs) != 1 {
		t.Errorf("splitDocs kept %d documents, want 1", len(docs))
	}
}

// whyComments are lines of the manifest that must say why, in a comment on
// the line or in the comment lines right above it.
var whyComments = []string{"hostPID: true", "runAsUser: 0", "seccompProfile:", "appArmorProfile:", `resources: ["nodes/pods"]`,
	"- --metrics-listen=$(POD_IP):9464", "- --listen=127.0.0.1:9464", "policyTypes: [Ingress]", "command_line: off"}

func TestEveryPrivilegeSaysWhy(t *testing.T) {
	data, err := os.ReadFile(manifestFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, problem := range uncommented(data) {
		t.Error(problem)
	}
}

// uncommented lists the capability lines (and whyComments lines) that have no
// comment of their own.
func uncommented(data []byte) []string {
	lines := strings.Split(string(data), "\n")
	var out []string
	check := func(what string, match func(string) bool) {
		found := 0
		for i, line := range lines {
			code, _, _ := strings.Cut(line, "#")
			if !match(strings.TrimSpace(code)) {
				continue
			}
			found++
			if !hasComment(lines, i) {
				out = append(out, fmt.Sprintf("%s:%d: %q has no comment saying why", manifestFile, i+1, strings.TrimSpace(line)))
			}
		}
		if found == 0 {
			out = append(out, fmt.Sprintf("%s: no line %s (block style, one item a line, so each can carry its comment)", manifestFile, what))
		}
	}
	for _, c := range wantCaps {
		check("- "+string(c), func(code string) bool { return code == "- "+string(c) })
	}
	for _, w := range whyComments {
		check(w, func(code string) bool { return code == w })
	}
	if !regexp.MustCompile(`(?m)^\s*#.*SYS_RESOURCE.*\n(\s*#.*\n)*?.*5\.11|(?m)^\s*#.*5\.11.*SYS_RESOURCE`).Match(data) &&
		!bytes.Contains(data, []byte("CAP_SYS_RESOURCE is not needed")) {
		out = append(out, manifestFile+": no comment says CAP_SYS_RESOURCE is not needed (kernel >= 5.11)")
	}
	return out
}

// hasComment: line i has a trailing comment, or the line above it is a
// comment of at least a few words.
func hasComment(lines []string, i int) bool {
	if _, c, ok := strings.Cut(lines[i], "# "); ok && len(strings.Fields(c)) >= 3 {
		return true
	}
	if i == 0 {
		return false
	}
	above, ok := strings.CutPrefix(strings.TrimSpace(lines[i-1]), "# ")
	return ok && len(strings.Fields(above)) >= 3
}

// TestUncommentedCapabilityFails strips the comments around each capability
// line in turn and expects exactly that line to be reported.
func TestUncommentedCapabilityFails(t *testing.T) {
	data, err := os.ReadFile(manifestFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range wantCaps {
		item := "- " + string(c)
		var kept []string
		lines := strings.Split(string(data), "\n")
		for _, line := range lines {
			if strings.TrimSpace(line) == item {
				// Drop the comment block above and any comment on the line.
				for len(kept) > 0 && strings.HasPrefix(strings.TrimSpace(kept[len(kept)-1]), "#") {
					kept = kept[:len(kept)-1]
				}
				line, _, _ = strings.Cut(line, "#")
			}
			kept = append(kept, line)
		}
		got := uncommented([]byte(strings.Join(kept, "\n")))
		if len(got) != 1 || !strings.Contains(got[0], strconv.Quote(item)) {
			t.Errorf("without the comment on %s, uncommented = %q, want one problem about it", item, got)
		}
	}
}

// TestKustomization: the kustomization lists the manifest (and only files
// that exist) and sets the namespace.
func TestKustomization(t *testing.T) {
	data, err := os.ReadFile("kubernetes/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Namespace  string   `json:"namespace"`
		Resources  []string `json:"resources"`
	}
	if err := decodeStrict(data, &k); err != nil {
		t.Fatal(err)
	}
	if k.Kind != "Kustomization" || k.Namespace != namespace || !slices.Contains(k.Resources, filepath.Base(manifestFile)) {
		t.Errorf("kustomization %+v: want kind Kustomization, namespace %s, resources with %s", k, namespace, filepath.Base(manifestFile))
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join("kubernetes", r)); err != nil {
			t.Error(err)
		}
	}
}
