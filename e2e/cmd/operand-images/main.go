// Command operand-images packs the operand, pause and toolbox images as OCI layout tars under
// <bin>/images (see package e2e/imagetars) and prints one line per image: name, reference, tar. With
// -env it prints the operator's image environment variables instead. The binaries must have been
// names by e2e/hack/build-operands.sh (`make operand-binaries`).
//
// Usage:
//
//	operand-images [flags] [image name...]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/imagetars"
)

func main() {
	v := imagetars.DefaultVersions()
	bin := flag.String("bin", "bin", "the bin dir holding the version-keyed binaries; tars go to <bin>/images")
	env := flag.Bool("env", false, "print NAME=ref lines of the operator's image environment variables")
	flag.StringVar(&v.Kube, "kube-version", v.Kube, "k8s.io/kubernetes version (pause source)")
	flag.StringVar(&v.CinderCSIPlugin, "cinder-csi-plugin-version", v.CinderCSIPlugin, "k8s.io/cloud-provider-openstack version")
	flag.StringVar(&v.Provisioner, "csi-provisioner-version", v.Provisioner, "external-provisioner version")
	flag.StringVar(&v.Attacher, "csi-attacher-version", v.Attacher, "external-attacher version")
	flag.StringVar(&v.Resizer, "csi-resizer-version", v.Resizer, "external-resizer version")
	flag.StringVar(&v.Snapshotter, "csi-snapshotter-version", v.Snapshotter, "external-snapshotter version")
	flag.StringVar(&v.KubeRBACProxy, "kube-rbac-proxy-version", v.KubeRBACProxy, "kube-rbac-proxy version")
	flag.Parse()

	if err := run(*bin, *env, v, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run packs the named images (all when none is named) and prints them. It is separate from main
// so that the signal handler is stopped before the process exits with an error.
func run(bin string, env bool, v imagetars.Versions, want []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	set, err := imagetars.Build(ctx, bin, v, want...)
	if err != nil {
		return err
	}
	if env {
		vars := set.Env()
		names := make([]string, 0, len(vars))
		for n := range vars {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Printf("%s=%s\n", n, vars[n])
		}
		return nil
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Printf("%s\t%s\t%s\n", n, set[n].Ref, set[n].Tar)
	}
	return nil
}
