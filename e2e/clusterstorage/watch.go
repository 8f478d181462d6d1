package clusterstorage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// Sample is one version of the ClusterCSIDriver's conditions, as the API server served it, and
// what ClusterOperator storage would say from them.
type Sample struct {
	At time.Time
	// Driver are the ClusterCSIDriver's conditions; Operator ClusterOperator(Driver).
	Driver, Operator []operatorv1.OperatorCondition
}

// True returns the types of the conditions of s (the driver's and the ClusterOperator's) whose
// type is one of types and whose status is True.
func (s Sample) True(types ...string) []string {
	var out []string
	for _, c := range slices.Concat(s.Driver, s.Operator) {
		if c.Status == operatorv1.ConditionTrue && slices.Contains(types, c.Type) {
			out = append(out, c.Type)
		}
	}
	return out
}

// ProgressingTypes are the conditions that must be True only while the operator's own rollouts
// run: both workloads' Progressing on the ClusterCSIDriver and ClusterOperator storage's.
var ProgressingTypes = []string{names.ConditionControllerProgressing, names.ConditionNodeProgressing, Progressing}

// Recorder records every version of the ClusterCSIDriver from a watch, so that a condition True
// for a few milliseconds is seen too (a poll would miss it).
type Recorder struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	samples []Sample
	errs    []error
}

// Watch starts recording the ClusterCSIDriver of the cluster cfg reaches. It returns once the
// first version is recorded. Stop ends the recording.
func Watch(cfg *rest.Config, scheme *runtime.Scheme) (*Recorder, error) {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Recorder{cancel: cancel, done: make(chan struct{})}
	started := make(chan struct{})
	go r.run(ctx, c, started)
	select {
	case <-started:
		return r, nil
	case <-time.After(time.Minute):
		r.Stop()
		return nil, fmt.Errorf("the ClusterCSIDriver could not be listed within a minute: %w", r.err())
	}
}

// run lists, then watches from the list's version, and lists again whenever the watch ends with
// its version expired.
func (r *Recorder) run(ctx context.Context, c client.WithWatch, started chan struct{}) {
	defer close(r.done)
	rv := ""
	for ctx.Err() == nil {
		list := &operatorv1.ClusterCSIDriverList{}
		if rv == "" {
			if err := c.List(ctx, list); err != nil {
				r.failed(err)
				time.Sleep(time.Second)
				continue
			}
			for i := range list.Items {
				r.record(&list.Items[i])
			}
			rv = list.ResourceVersion
			if started != nil {
				close(started)
				started = nil
			}
		}
		wi, err := c.Watch(ctx, list, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			r.failed(err)
			rv = ""
			continue
		}
		for ev := range wi.ResultChan() {
			drv, ok := ev.Object.(*operatorv1.ClusterCSIDriver)
			switch {
			case ev.Type == watch.Error:
				rv = ""
			case ok && ev.Type == watch.Bookmark:
				rv = drv.ResourceVersion
			case ok && (ev.Type == watch.Added || ev.Type == watch.Modified):
				rv = drv.ResourceVersion
				r.record(drv)
			}
		}
		wi.Stop()
	}
}

func (r *Recorder) record(drv *operatorv1.ClusterCSIDriver) {
	if drv.Name != names.ClusterCSIDriverName {
		return
	}
	conds := slices.Clone(drv.Status.Conditions)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, Sample{At: time.Now(), Driver: conds, Operator: ClusterOperator(conds)})
}

func (r *Recorder) failed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *Recorder) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// Since returns the samples recorded at or after t.
func (r *Recorder) Since(t time.Time) []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, _ := slices.BinarySearchFunc(r.samples, t, func(s Sample, t time.Time) int { return s.At.Compare(t) })
	return slices.Clone(r.samples[i:])
}

// Stop ends the recording.
func (r *Recorder) Stop() {
	r.cancel()
	<-r.done
}

// Describe returns one line per sample that has any of types True: when, and which.
func Describe(samples []Sample, since time.Time, types ...string) string {
	var lines []string
	for _, s := range samples {
		if t := s.True(types...); len(t) > 0 {
			lines = append(lines, fmt.Sprintf("+%s: %s", s.At.Sub(since).Round(time.Millisecond), strings.Join(t, ", ")))
		}
	}
	return strings.Join(lines, "\n")
}
