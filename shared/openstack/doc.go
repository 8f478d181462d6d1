// Package openstack is the client of the operator's own OpenStack calls: authentication from
// clouds.yaml (passwords, application credentials, tokens), the proxy and CA the cluster asks
// for, the listings the operator makes (Nova's and Cinder's availability zones, Cinder's backup
// services) as the Client's methods, and every failure classified into a stable, secret-free
// condition reason and message (Classify, Message, Describe).
//
// It also holds the topology rule those listings feed, openshift/csi-operator's: topology is
// enabled iff every available compute AZ is also a volume AZ. When it does not hold, the node
// plugin would advertise a compute AZ that Cinder cannot create volumes in, and provisioning fails
// (kubernetes/cloud-provider-openstack#1735, #1300). Unlike csi-operator, which computes the
// decision once per process and degrades on any API error, callers here re-detect on an interval
// and keep the last decision when detection fails.
package openstack
