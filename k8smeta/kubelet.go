package k8smeta

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/specprobe/specprobe/internal/safefile"
)

// maxPodListBytes caps the decoded body; a full node (110 pods) lists a few MiB.
const maxPodListBytes = 64 << 20

// podList is the part of a v1.PodList this package reads; a local struct
// keeps k8s.io modules out of the dependency graph.
type podList struct {
	Items []pod `json:"items"`
}

type pod struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
	Status struct {
		ContainerStatuses          []containerStatus `json:"containerStatuses"`
		InitContainerStatuses      []containerStatus `json:"initContainerStatuses"`
		EphemeralContainerStatuses []containerStatus `json:"ephemeralContainerStatuses"`
	} `json:"status"`
}

type containerStatus struct {
	Name        string `json:"name"`
	ContainerID string `json:"containerID"` // "<runtime>://<id>"
}

// container finds the container with the runtime id; the runtime is the
// scheme of its containerID ("containerd", "docker", "cri-o").
func (p *pod) container(id string) (name, runtime string) {
	if id == "" {
		return "", ""
	}
	for _, list := range [][]containerStatus{
		p.Status.ContainerStatuses,
		p.Status.InitContainerStatuses,
		p.Status.EphemeralContainerStatuses,
	} {
		for _, cs := range list {
			if scheme, cid, ok := strings.Cut(cs.ContainerID, "://"); ok && cid == id {
				return cs.Name, scheme
			}
		}
	}
	return "", ""
}

// fetchPods is GET /pods on the kubelet, indexed by pod UID.
func (r *Resolver) fetchPods(ctx context.Context) (map[string]*pod, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.kubeletURL+"/pods", nil)
	if err != nil {
		return nil, fmt.Errorf("k8smeta: kubelet /pods: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	// Projected service-account tokens are rotated on disk, so read per
	// request (a regular file of a few KiB: a token is under 2 KiB).
	if r.tokenFile != NoToken {
		if tok, err := safefile.ReadRegular(r.tokenFile, 64<<10); err == nil {
			if t := strings.TrimSpace(string(tok)); t != "" {
				req.Header.Set("Authorization", "Bearer "+t)
			}
		}
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("k8smeta: kubelet /pods: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			hint = " (the service account needs get on nodes/pods, which the kubelet checks for /pods from Kubernetes 1.33, KubeletFineGrainedAuthz; an older kubelet checks nodes/proxy, which also allows exec into every container and is not granted)"
		}
		return nil, fmt.Errorf("k8smeta: kubelet /pods: %s%s", resp.Status, hint)
	}
	var list podList
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxPodListBytes)).Decode(&list); err != nil {
		return nil, fmt.Errorf("k8smeta: kubelet /pods: decode: %w", err)
	}
	pods := make(map[string]*pod, len(list.Items))
	for i := range list.Items {
		pods[list.Items[i].Metadata.UID] = &list.Items[i]
	}
	return pods, nil
}
