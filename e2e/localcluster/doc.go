// Package localcluster starts and stops named Kubernetes clusters on loopback from real upstream
// binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok), so that tests
// and run-local exercise the operator against real API semantics (server-side apply, field
// ownership, status subresources, garbage collection, scheduling) without a container engine.
//
// Nodes are plain Node objects that kwok marks Ready and whose pods kwok marks Running, which is
// enough for Deployments and DaemonSets to become Available. Nothing runs in the pods.
//
// Every child process runs in its own process group and receives SIGKILL when the process that
// started it dies, so a killed test binary leaves nothing behind; Stop ends and reaps them all.
package localcluster
