// Package deploy holds the Kubernetes manifests; its test decodes them strictly.
package deploy
