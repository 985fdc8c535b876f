// Package k8smeta finds where a traced process sits in a Kubernetes cluster
// (pod, namespace, container) so spans can carry it as OpenTelemetry resource
// attributes. Outside Kubernetes it degrades to what the cgroup path tells:
// a container id, or nothing.
package k8smeta

import "go.opentelemetry.io/otel/attribute"

// Info is what is known of a process's place in the cluster; empty fields are unknown.
type Info struct {
	ContainerID   string // 64-hex runtime id (docker, containerd, cri-o), "" outside containers
	Runtime       string // "docker", "containerd", "cri-o" when the cgroup path (or the kubelet) says so
	PodUID        string // with dashes, as the API shows it
	PodName       string
	Namespace     string
	ContainerName string
	NodeName      string
}

// Semantic-convention keys, spelled out rather than taken from a semconv
// package so that a semconv version bump cannot silently rename them.
const (
	keyContainerID      = attribute.Key("container.id")
	keyContainerRuntime = attribute.Key("container.runtime")
	keyPodUID           = attribute.Key("k8s.pod.uid")
	keyPodName          = attribute.Key("k8s.pod.name")
	keyNamespace        = attribute.Key("k8s.namespace.name")
	keyContainerName    = attribute.Key("k8s.container.name")
	keyNodeName         = attribute.Key("k8s.node.name")
)

// Attributes are the OTel semantic-convention resource attributes for the
// known fields; unknown fields are left out rather than sent empty.
func (i Info) Attributes() []attribute.KeyValue {
	var kvs []attribute.KeyValue
	add := func(k attribute.Key, v string) {
		if v != "" {
			kvs = append(kvs, k.String(v))
		}
	}
	add(keyContainerID, i.ContainerID)
	add(keyContainerRuntime, i.Runtime)
	add(keyPodUID, i.PodUID)
	add(keyPodName, i.PodName)
	add(keyNamespace, i.Namespace)
	add(keyContainerName, i.ContainerName)
	add(keyNodeName, i.NodeName)
	return kvs
}
