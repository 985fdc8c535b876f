package daemon

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Owner is whose a process is: what selection and the slot caps look at.
type Owner struct {
	UID    int
	Cgroup string // the cgroup v2 path ("/kubepods.slice/..."); v1: the first path found
	PodUID string // from the cgroup path; "" outside Kubernetes
	// From the pod metadata, looked up only when a select key needs them.
	Namespace, Pod string
}

// needsPod tells whether deciding needs the pod's namespace and name.
func (s Select) needsPod() bool { return len(s.Namespaces) > 0 || len(s.Pods) > 0 }

// allows returns "" when the process may be traced, else which key says it
// may not.
func (s Select) allows(o Owner) string {
	switch {
	case len(s.UIDs) > 0 && !slices.Contains(s.UIDs, o.UID):
		return fmt.Sprintf("uid %d is not in select.uids", o.UID)
	case len(s.Cgroups) > 0 && !slices.ContainsFunc(s.Cgroups, func(p string) bool { return cgroupMatch(p, o.Cgroup) }):
		return fmt.Sprintf("cgroup %s matches no select.cgroups pattern", o.Cgroup)
	case len(s.Namespaces) > 0 && !slices.Contains(s.Namespaces, o.Namespace):
		return fmt.Sprintf("namespace %q is not in select.namespaces", o.Namespace)
	case len(s.Pods) > 0 && !slices.ContainsFunc(s.Pods, func(p string) bool { ok, _ := path.Match(p, o.Pod); return ok && o.Pod != "" }):
		return fmt.Sprintf("pod %q matches no select.pods pattern", o.Pod)
	}
	return ""
}

// cgroupMatch: the pattern matches the cgroup or one above it, so that
// "/kubepods.slice/*" covers every pod's cgroups below.
func cgroupMatch(pattern, cgroup string) bool {
	for p := cgroup; p != "" && p != "."; p = path.Dir(p) {
		if ok, _ := path.Match(pattern, p); ok {
			return true
		}
		if p == "/" {
			break
		}
	}
	return false
}

// capHit returns which cap keeps o from a slot while the owners in traced
// hold theirs, or "": max_processes, then max_per_uid (root's processes,
// the node's own servers, are not counted against it), then max_per_pod.
func (c Config) capHit(traced []Owner, o Owner) string {
	if len(traced) >= c.MaxProcesses {
		return reasonMaxProcesses
	}
	uid, pod := 0, 0
	for _, t := range traced {
		if t.UID == o.UID {
			uid++
		}
		if o.PodUID != "" && t.PodUID == o.PodUID {
			pod++
		}
	}
	if c.MaxPerUID > 0 && o.UID != 0 && uid >= c.MaxPerUID {
		return reasonMaxPerUID
	}
	if c.MaxPerPod > 0 && o.PodUID != "" && pod >= c.MaxPerPod {
		return reasonMaxPerPod
	}
	return ""
}

// cgroupPath is the cgroup of /proc/PID/cgroup content: the unified (v2)
// hierarchy's path, else the first v1 path.
func cgroupPath(data []byte) string {
	first := ""
	for _, line := range strings.Split(string(data), "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		_, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if id == "0" {
			return p
		}
		if first == "" {
			first = p
		}
	}
	return first
}
