package controlplane

import (
	"context"
	"fmt"
	"sync"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/access"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/metrics"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
)

// cinderRefresh is how often Cinder is asked again about the volume of an attachment that stays
// stuck: the condition follows Cinder's view within this, at one read per stuck attachment.
const cinderRefresh = time.Minute

// AttachmentMonitor explains the driver's VolumeAttachments that do not finish
// (VolumeAttachmentWarning) and names the nodes at their attach limit (NodeAttachLimitWarning).
// It is the controlplane manager's because that manager sees both sides: the guest's
// VolumeAttachments, PersistentVolumes and CSINodes, and Cinder through the cluster's
// credentials. Its conditions have a field owner of their own.
//
// At rest it asks nothing: the guest's objects come from watches, and only an attachment past
// the bound costs reads, its PersistentVolume once and its volume in Cinder once per
// cinderRefresh, in the background, never inside a reconcile.
type AttachmentMonitor struct {
	// r reads the inputs (the credentials, the user's configuration) and resolves them as the
	// controlplane reconciler does.
	r *Reconciler
	// guest reads the guest from the caches; guestAPI reads a stuck attachment's
	// PersistentVolume from the API server, so that no whole PersistentVolume is ever cached.
	guest    client.Client
	guestAPI client.Reader
	// guestCache is where volumes starts its watch of the PersistentVolumes, which it caches
	// cut down to their zone (volumeCache).
	guestCache cache.Cache
	volumes    *volumeCounter
	recorder   recorder.EventRecorder
	now        func() time.Time
	// newReader builds the Cinder client of one round of reads.
	newReader func(context.Context, openstack.Config) (openstack.VolumeReader, error)

	// ctx is the manager's, for the reads in the background; events ends a round of them.
	ctx    context.Context
	events chan event.GenericEvent

	mu sync.Mutex
	// facts are what is known of each stuck attachment, by stuckAttachment.key.
	facts map[string]*knownFacts
	// reading is set while a round of Cinder reads runs.
	reading bool
	// reported are the attachments whose passing of the bound was recorded as an Event, by
	// name: an Event says when each finishes.
	reported map[string]reportedAttachment
}

// knownFacts are the facts of one stuck attachment and when Cinder was last asked.
type knownFacts struct {
	attachmentFacts
	pvRead bool
	asked  time.Time
}

// phaseTitle starts an Event's note.
var phaseTitle = map[attachmentPhase]string{phaseAttaching: "Attaching", phaseDetaching: "Detaching"}

// reportedAttachment is a stuck attachment an Event was recorded for.
type reportedAttachment struct {
	stuckAttachment
	obj *storagev1.VolumeAttachment
}

// newAttachmentMonitor returns the monitor of r's clusters.
func newAttachmentMonitor(r *Reconciler, guest cluster.Cluster) *AttachmentMonitor {
	return &AttachmentMonitor{
		r: r, guest: guest.GetClient(), guestAPI: guest.GetAPIReader(), guestCache: guest.GetCache(), volumes: newVolumeCounter(),
		recorder: r.Recorder, now: time.Now,
		newReader: func(ctx context.Context, c openstack.Config) (openstack.VolumeReader, error) {
			return openstack.NewClient(ctx, c)
		},
		events: make(chan event.GenericEvent, 1), facts: map[string]*knownFacts{}, reported: map[string]reportedAttachment{},
	}
}

// Start keeps the manager's context for the reads in the background, until the manager stops.
func (m *AttachmentMonitor) Start(ctx context.Context) error {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	<-ctx.Done()
	return nil
}

// SetupWithManager watches what the monitor judges: the driver's VolumeAttachments, the
// CSINodes, the ClusterCSIDriver, the user's configuration and the credentials.
func (m *AttachmentMonitor) SetupWithManager(mgr ctrl.Manager, mgmt, guest cluster.Cluster) error {
	if err := mgr.Add(m); err != nil {
		return err
	}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		va, ok := o.(*storagev1.VolumeAttachment)
		return ok && va.Spec.Attacher == names.DriverName
	})
	guestCache := guest.GetCache()
	return ctrl.NewControllerManagedBy(mgr).
		Named("attachments").
		WatchesRawSource(clusters.Watch(guestCache, &operatorv1.ClusterCSIDriver{}, clusters.DriverChanged)).
		WatchesRawSource(clusters.Watch(guestCache, &storagev1.VolumeAttachment{}, ours)).
		WatchesRawSource(clusters.Watch(guestCache, &storagev1.CSINode{})).
		WatchesRawSource(clusters.Watch(guestCache, &corev1.ConfigMap{}, clusters.Named(names.UserConfigMap))).
		WatchesRawSource(clusters.Watch(mgmt.GetCache(), &corev1.Secret{}, clusters.InNamespace(m.r.Config.Namespace), clusters.Named(names.CredentialsSecret))).
		// A round of Cinder reads that ended.
		WatchesRawSource(source.Channel(m.events, clusters.EnqueueDriver)).
		Complete(m)
}

// Reconcile judges the attachments and writes the monitor's conditions.
func (m *AttachmentMonitor) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := conditions.Writer{Applier: apply.New(m.guest, names.FieldOwnerAttachments).On(m.r.errCluster(apply.ClusterGuest)), Recorder: m.recorder}
	return conditions.Reconcile(ctx, m.guest, req.Name, m.now(), w, m.reconcile)
}

func (m *AttachmentMonitor) reconcile(ctx context.Context, driver *operatorv1.ClusterCSIDriver, st *conditions.Set) (ctrl.Result, error) {
	switch driver.Spec.ManagementState {
	case operatorv1.Unmanaged:
		st.Unmanaged(names.AttachmentConditions...)
		return ctrl.Result{}, nil
	case operatorv1.Removed:
		for _, t := range names.AttachmentConditions {
			st.False(t, names.ReasonRemoved, "managementState is Removed: the driver is not installed.")
		}
		return ctrl.Result{}, nil
	}
	// The volumes gauge counts from a watch that starts with the first reconcile it may.
	volumesRecheck, err := m.volumes.watch(ctx, m.guest, m.guestCache)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Counting the driver's volumes by zone")
	}
	bound, err := m.bound(ctx)
	if err != nil {
		st.Keep(driver.Status.Conditions, names.AttachmentConditions...)
		return ctrl.Result{}, err
	}
	var vas storagev1.VolumeAttachmentList
	var nodes storagev1.CSINodeList
	if err := m.guest.List(ctx, &vas); err != nil {
		st.Keep(driver.Status.Conditions, names.AttachmentConditions...)
		return ctrl.Result{}, fmt.Errorf("listing VolumeAttachments: %w", err)
	}
	if err := m.guest.List(ctx, &nodes); err != nil {
		st.Keep(driver.Status.Conditions, names.AttachmentConditions...)
		return ctrl.Result{}, fmt.Errorf("listing CSINodes: %w", err)
	}
	now := m.now()
	stuck, next := findStuck(vas.Items, now, bound)
	facts, askIn, due := m.gather(ctx, stuck, nodes.Items, now)
	if len(due) > 0 {
		m.startReads(ctx, driver, due, now)
	}
	full := nodesAtLimit(vas.Items, nodes.Items)
	setWarningConditions(st, []desired.Warning{attachmentWarning(stuck, facts, bound), nodeAttachLimitWarning(full)})
	attaching := 0
	for _, s := range stuck {
		if s.Phase == phaseAttaching {
			attaching++
		}
	}
	metrics.SetAttachments(attaching, len(stuck)-attaching, len(full))
	m.report(stuck, facts, vas.Items, now)

	var after time.Duration
	if !next.IsZero() {
		after = next.Sub(now)
	}
	return ctrl.Result{RequeueAfter: access.Soonest(after, askIn, volumesRecheck)}, nil
}

// bound is attachment_warning_after from the user's cinder-csi-config, read from the cache: the
// default when the ConfigMap or the key is missing, and when its value is not valid (which the
// controlplane reconciler's ConfigDegraded names).
func (m *AttachmentMonitor) bound(ctx context.Context) (time.Duration, error) {
	var cm corev1.ConfigMap
	ok, err := apply.GetOptional(ctx, m.guest, m.r.errCluster(apply.ClusterGuest),
		client.ObjectKey{Namespace: names.OpenShiftConfigNamespace, Name: names.UserConfigMap}, &cm)
	if err != nil || !ok {
		return desired.DefaultAttachmentWarningAfter, err
	}
	d, _ := desired.ParseAttachmentWarningAfter(cm.Data[names.KeyAttachmentWarningAfter])
	return d, nil
}

// gather returns the facts of every stuck attachment, reading the PersistentVolumes it has not
// read yet; due are the stuck attachments whose volumes were not asked about in Cinder within
// cinderRefresh, and askIn is when the next of those is due (zero when nothing is stuck).
func (m *AttachmentMonitor) gather(ctx context.Context, stuck []stuckAttachment, nodes []storagev1.CSINode,
	now time.Time) (facts map[string]attachmentFacts, askIn time.Duration, due []stuckAttachment) {
	servers := map[string]string{}
	for _, n := range nodes {
		for _, d := range n.Spec.Drivers {
			if d.Name == names.DriverName {
				servers[n.Name] = d.NodeID
			}
		}
	}
	// The PersistentVolumes not read yet are read without the lock, which the round of Cinder
	// reads in the background takes to record its results.
	m.mu.Lock()
	var unread []stuckAttachment
	for _, s := range stuck {
		if f := m.facts[s.key()]; f == nil || !f.pvRead {
			unread = append(unread, s)
		}
	}
	m.mu.Unlock()
	volumes := map[string]knownFacts{}
	for _, s := range unread {
		var f knownFacts
		f.VolumeID, f.pvRead = m.volumeOf(ctx, s.PV)
		volumes[s.key()] = f
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	keep := map[string]*knownFacts{}
	for _, s := range stuck {
		f := m.facts[s.key()]
		if f == nil {
			f = &knownFacts{}
		}
		keep[s.key()] = f
		f.Server = servers[s.Node]
		if read, ok := volumes[s.key()]; ok && !f.pvRead {
			f.VolumeID, f.pvRead = read.VolumeID, read.pvRead
		}
		if f.VolumeID == "" {
			continue
		}
		if wait := f.asked.Add(cinderRefresh).Sub(now); wait > 0 {
			if askIn == 0 || wait < askIn {
				askIn = wait
			}
			continue
		}
		due = append(due, s)
		if askIn == 0 || cinderRefresh < askIn {
			askIn = cinderRefresh
		}
	}
	m.facts = keep
	facts = make(map[string]attachmentFacts, len(keep))
	for k, f := range keep {
		facts[k] = f.attachmentFacts
	}
	return facts, askIn, due
}

// volumeOf reads the Cinder volume of PersistentVolume pv; read is false when it could not be
// read (and so is to be read again).
func (m *AttachmentMonitor) volumeOf(ctx context.Context, pv string) (volumeID string, read bool) {
	if pv == "" {
		return "", true
	}
	var obj corev1.PersistentVolume
	err := m.guestAPI.Get(ctx, client.ObjectKey{Name: pv}, &obj)
	switch {
	case apierrors.IsNotFound(err):
		return "", true
	case err != nil:
		ctrl.LoggerFrom(ctx).V(2).Info("Reading the PersistentVolume of a stuck attachment", "persistentVolume", pv, "error", err.Error())
		return "", false
	case obj.Spec.CSI == nil || obj.Spec.CSI.Driver != names.DriverName:
		return "", true
	}
	return obj.Spec.CSI.VolumeHandle, true
}

// credentials resolves the inputs as the controlplane reconciler does, for a round of reads
// only: ok is false when they are not valid, or cannot be read.
func (m *AttachmentMonitor) credentials(ctx context.Context, driver *operatorv1.ClusterCSIDriver) (listingRequest, bool) {
	in, err := m.r.readInputs(ctx, driver)
	if err != nil {
		return listingRequest{}, false
	}
	c, ok := desired.Resolve(*in).Credentials()
	return listingRequest(c), ok
}

// startReads asks Cinder, in the background, about the volumes of due, with one client (one
// token) for the round, unless a round runs already; its end triggers a reconcile.
func (m *AttachmentMonitor) startReads(ctx context.Context, driver *operatorv1.ClusterCSIDriver, due []stuckAttachment, now time.Time) {
	m.mu.Lock()
	busy := m.reading || m.ctx == nil
	m.mu.Unlock()
	if busy {
		return
	}
	in, ok := m.credentials(ctx, driver)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reading {
		return
	}
	ids := map[string]string{}
	for _, s := range due {
		f := m.facts[s.key()]
		if f == nil {
			continue // no longer stuck
		}
		f.asked = now
		if !ok {
			f.CinderError = "the operator's OpenStack credentials are not valid (see OpenStackCinderConfigDegraded)"
			continue
		}
		ids[s.key()] = f.VolumeID
	}
	if len(ids) == 0 {
		return
	}
	m.reading = true
	bg := m.ctx
	go func() {
		results := m.read(bg, in, ids)
		m.mu.Lock()
		for k, r := range results {
			if f := m.facts[k]; f != nil {
				f.Cinder, f.CinderError = r.Cinder, r.CinderError
			}
		}
		m.reading = false
		m.mu.Unlock()
		select {
		case m.events <- event.GenericEvent{Object: &operatorv1.ClusterCSIDriver{}}:
		default:
		}
	}()
}

// read asks Cinder about each volume of ids (by stuck key) with one client.
func (m *AttachmentMonitor) read(ctx context.Context, in listingRequest, ids map[string]string) map[string]attachmentFacts {
	out := make(map[string]attachmentFacts, len(ids))
	fail := func(err error) map[string]attachmentFacts {
		msg := openstack.Describe(err)
		for k := range ids {
			if _, read := out[k]; !read {
				out[k] = attachmentFacts{CinderError: msg}
			}
		}
		return out
	}
	cfg, err := in.openStackConfig(m.r.Config.OpenStackTimeout)
	if err != nil {
		return fail(err)
	}
	reader, err := m.newReader(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	defer reader.Close()
	for k, id := range ids {
		st, err := reader.Volume(ctx, id)
		if err != nil {
			// Cinder that fails one read (a read of a volume it does not know is no error)
			// would fail the others the same way: they wait for the next round, so that a
			// hung Cinder costs one timeout a round, not one per stuck attachment.
			return fail(err)
		}
		out[k] = attachmentFacts{Cinder: &st}
	}
	return out
}

// report records an Event on each attachment once it passed the bound and Cinder's view of it
// is known, and one when an attachment reported so finishes (or is deleted).
func (m *AttachmentMonitor) report(stuck []stuckAttachment, facts map[string]attachmentFacts, vas []storagev1.VolumeAttachment, now time.Time) {
	if m.recorder == nil {
		return
	}
	objs := map[string]*storagev1.VolumeAttachment{}
	for i := range vas {
		objs[vas[i].Name] = &vas[i]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	still := map[string]bool{}
	for _, s := range stuck {
		still[s.Name] = true
		f := facts[s.key()]
		if prev, ok := m.reported[s.Name]; ok && prev.key() == s.key() {
			continue
		}
		if f.VolumeID != "" && f.Cinder == nil && f.CinderError == "" {
			continue // Cinder's view comes with the next round.
		}
		obj := objs[s.Name].DeepCopy()
		m.reported[s.Name] = reportedAttachment{stuckAttachment: s, obj: obj}
		m.recorder.Eventf(obj, nil, corev1.EventTypeWarning, names.ReasonVolumeAttachmentStuck, string(s.Phase),
			"%s since %s: %s", phaseTitle[s.Phase], s.Since.UTC().Format(time.RFC3339), explain(s, f))
	}
	for name, r := range m.reported {
		if still[name] {
			continue
		}
		delete(m.reported, name)
		m.recorder.Eventf(r.obj, nil, corev1.EventTypeNormal, names.ReasonVolumeAttachmentFinished, string(r.Phase),
			"%s is no longer %s, after %s.", name, r.Phase, now.Sub(r.Since).Round(time.Second))
	}
}
