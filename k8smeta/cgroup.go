package k8smeta

import "strings"

// runtimePrefixes are the scope-name prefixes the systemd cgroup driver (and
// cri-o with cgroupfs) puts before the container id.
var runtimePrefixes = []struct{ prefix, runtime string }{
	{"cri-containerd-", "containerd"},
	{"crio-", "cri-o"},
	{"docker-", "docker"},
}

// ParseCgroup reads the content of /proc/PID/cgroup (v1 or v2) and returns
// container id, runtime and pod UID. Anything it does not recognise yields
// empty strings.
func ParseCgroup(data []byte) (containerID, runtime, podUID string) {
	for _, line := range strings.Split(string(data), "\n") {
		// "hierarchy-ID:controller-list:path"; the path may itself hold ':'.
		_, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		_, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		id, rt, uid := parseCgroupPath(path)
		if uid == "" {
			uid = podUID
		}
		if id != "" {
			return id, rt, uid
		}
		podUID = uid
	}
	return "", "", podUID
}

// parseCgroupPath looks at every path segment, later ones winning, so that
// nested layouts (docker in docker, sub-cgroups below the scope) resolve to
// the innermost container.
func parseCgroupPath(path string) (id, runtime, podUID string) {
	// Only trust pod-looking segments under kubepods: "pod<uuid>" is too
	// generic a shape to claim outside Kubernetes.
	inKube := strings.Contains(path, "kubepods")
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		if inKube {
			if uid := podUIDFromSegment(seg); uid != "" {
				podUID = uid
			}
		}
		if c, rt := containerFromSegment(seg); c != "" {
			id, runtime = c, rt
			// cgroup v1 under plain docker: /docker/<id>.
			if rt == "" && i > 0 && segs[i-1] == "docker" {
				runtime = "docker"
			}
		}
	}
	return id, runtime, podUID
}

// podUIDFromSegment handles "pod<uid>" (cgroupfs) and
// "kubepods[-qos]-pod<uid>.slice" (systemd, which escapes '-' as '_').
func podUIDFromSegment(seg string) string {
	seg = strings.TrimSuffix(seg, ".slice")
	var rest string
	if r, ok := strings.CutPrefix(seg, "pod"); ok {
		rest = r
	} else if i := strings.LastIndex(seg, "-pod"); i >= 0 {
		rest = seg[i+len("-pod"):]
	} else {
		return ""
	}
	rest = strings.ReplaceAll(rest, "_", "-")
	if !isUUID(rest) {
		return ""
	}
	return rest
}

// containerFromSegment handles "<prefix><id>.scope", "crio-<id>" and a bare
// 64-hex id (cgroupfs driver, where the runtime is not named).
func containerFromSegment(seg string) (id, runtime string) {
	seg = strings.TrimSuffix(seg, ".scope")
	for _, p := range runtimePrefixes {
		if rest, ok := strings.CutPrefix(seg, p.prefix); ok && isHex(rest, 64) {
			return rest, p.runtime
		}
	}
	if isHex(seg, 64) {
		return seg, ""
	}
	return "", ""
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHexDigit(s[i]) {
			return false
		}
	}
	return true
}

// isHexDigit accepts lowercase only: runtimes and the API print ids that way,
// and callers compare ids as strings.
func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
}

// isUUID checks the 8-4-4-4-12 lowercase form the API uses for pod UIDs.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHexDigit(s[i]) {
				return false
			}
		}
	}
	return true
}
