package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kindNetwork is the Docker network kind puts every cluster's nodes on.
const kindNetwork = "kind"

// kind drives the kind command.
type kind struct {
	Binary    string
	Dir       string
	NodeImage string
}

// cluster is a kind cluster as seen from this machine.
type cluster struct {
	Name       string
	Kubeconfig string
	Config     *rest.Config
}

// Create creates a one-node cluster and writes its kubeconfig into the work directory.
func (k *kind) Create(ctx context.Context, name string) (*cluster, error) {
	kc := filepath.Join(k.Dir, name+".kubeconfig")
	logf("Creating kind cluster %s", name)
	if err := k.cmd(ctx, "create", "cluster", "--name", name, "--image", k.NodeImage, "--kubeconfig", kc, "--wait", "3m"); err != nil {
		return nil, fmt.Errorf("creating kind cluster %s: %w", name, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return nil, err
	}
	return &cluster{Name: name, Kubeconfig: kc, Config: cfg}, nil
}

// Delete deletes a cluster; a cluster that does not exist is not an error.
func (k *kind) Delete(ctx context.Context, name string) error {
	return k.cmd(ctx, "delete", "cluster", "--name", name)
}

// Load copies a local image into every node of a cluster.
func (k *kind) Load(ctx context.Context, name, image string) error {
	if err := k.cmd(ctx, "load", "docker-image", image, "--name", name); err != nil {
		return fmt.Errorf("loading %s into %s: %w", image, name, err)
	}
	return nil
}

// InternalKubeconfig returns an admin kubeconfig of the cluster that works from the other
// cluster's pods: its server is the control-plane node's address on the kind network, which
// the API server's certificate names, rather than a port published on this machine.
func (k *kind) InternalKubeconfig(ctx context.Context, name string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, k.Binary, "get", "kubeconfig", "--internal", "--name", name).Output()
	if err != nil {
		return nil, fmt.Errorf("reading the internal kubeconfig of %s: %w", name, err)
	}
	ip, err := containerIP(ctx, name+"-control-plane")
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.Load(out)
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + net.JoinHostPort(ip, "6443")
	}
	return clientcmd.Write(*cfg)
}

func (k *kind) cmd(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, k.Binary, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// containerIP returns a container's IPv4 address on the kind network.
func containerIP(ctx context.Context, container string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", "inspect", "--format",
		"{{with index .NetworkSettings.Networks \""+kindNetwork+"\"}}{{.IPAddress}}{{end}}", container).Output()
	if err != nil {
		return "", fmt.Errorf("inspecting container %s: %w", container, err)
	}
	ip := strings.TrimSpace(string(out))
	if net.ParseIP(ip) == nil {
		return "", fmt.Errorf("container %s has no address on the %s network", container, kindNetwork)
	}
	return ip, nil
}

// gatewayIP returns this machine's IPv4 address on the kind network: pods of both clusters
// reach a server listening there.
func gatewayIP(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", "network", "inspect", kindNetwork, "--format", "{{json .IPAM.Config}}").Output()
	if err != nil {
		return "", fmt.Errorf("inspecting the %s network: %w", kindNetwork, err)
	}
	var cfgs []struct {
		Gateway string `json:"Gateway"`
	}
	if err := json.Unmarshal(out, &cfgs); err != nil {
		return "", fmt.Errorf("reading the %s network's address plan: %w", kindNetwork, err)
	}
	for _, c := range cfgs {
		if ip := net.ParseIP(c.Gateway); ip != nil && ip.To4() != nil {
			return c.Gateway, nil
		}
	}
	return "", fmt.Errorf("the %s network has no IPv4 gateway", kindNetwork)
}

// loadImages loads the operator and controller images into the management cluster and the
// node plugin's images into the guest.
func loadImages(ctx context.Context, k *kind, o options, mgmt, guest string) error {
	if err := k.Load(ctx, mgmt, o.OperatorImage); err != nil {
		return err
	}
	for _, op := range operandImages {
		ref := o.Images[op.Env]
		if op.Mgmt {
			if err := k.Load(ctx, mgmt, ref); err != nil {
				return err
			}
		}
		if op.Guest {
			if err := k.Load(ctx, guest, ref); err != nil {
				return err
			}
		}
	}
	return nil
}
