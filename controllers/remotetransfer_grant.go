package controllers

import (
	"fmt"
	"path"
	"slices"
	"strings"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// What a serving site allows a peer: the checks a RemoteTransfer must pass before any of
// its agents starts, run again on every pass, so that a grant withdrawn (or a
// TransferPeer deleted) stops what runs. Pure functions of the objects, table-tested.

// Reasons of a RemoteTransfer's Accepted condition.
const (
	ReasonGranted              = "Granted"
	ReasonPeerNotFound         = "PeerNotFound"
	ReasonRemoteNamespace      = "NamespaceNotAllowed"
	ReasonNotGranted           = "NotGranted"
	ReasonPathNotGranted       = "PathNotGranted"
	ReasonEncryptionRequired   = "EncryptionRequired"
	ReasonRemoteEndpointAbsent = "EndpointNotFound"
)

// peerOf is the TransferPeer whose namespace the RemoteTransfer is in (the credential
// that wrote it works there alone), or nil.
func peerOf(peers []dtnflowv1alpha1.TransferPeer, namespace string) *dtnflowv1alpha1.TransferPeer {
	for i := range peers {
		if peers[i].Spec.Namespace == namespace && peers[i].DeletionTimestamp == nil {
			return &peers[i]
		}
	}
	return nil
}

// grantProblem is why this site does not run the RemoteTransfer, or nil when its
// TransferPeer grants it.
func grantProblem(peer *dtnflowv1alpha1.TransferPeer, rt *dtnflowv1alpha1.RemoteTransfer, ep *dtnflowv1alpha1.TransferEndpoint) *jobProblem {
	refuse := func(reason, format string, args ...any) *jobProblem {
		return &jobProblem{Reason: reason, Blocking: true, Message: fmt.Sprintf(format, args...)}
	}
	if peer == nil {
		return refuse(ReasonPeerNotFound, "no TransferPeer of this site names namespace %s: the peer's access was revoked (or never granted)", rt.Namespace)
	}
	if !slices.Contains(peer.Spec.RemoteNamespaces, "*") && !slices.Contains(peer.Spec.RemoteNamespaces, rt.Spec.Origin.Namespace) {
		return refuse(ReasonRemoteNamespace, "TransferPeer %s does not allow jobs of namespace %s (spec.remoteNamespaces)", peer.Name, rt.Spec.Origin.Namespace)
	}
	if requiresEncryption(peer) && rt.Spec.Integrity.InFlight != dtnflowv1alpha1.InFlightEncrypted {
		return refuse(ReasonEncryptionRequired, "TransferPeer %s requires data encrypted in flight (spec.requireEncryption): the job's spec.integrity.inFlight is %s, want Encrypted", peer.Name, inFlightOr(rt.Spec.Integrity.InFlight))
	}
	want := dtnflowv1alpha1.GrantRead
	if rt.Spec.Side == dtnflowv1alpha1.RemoteSideDestination {
		want = dtnflowv1alpha1.GrantWrite
	}
	var paths [][]dtnflowv1alpha1.RelativePath // the path lists of the grants that fit
	for _, g := range peer.Spec.Grants {
		if g.Endpoint == rt.Spec.Endpoint && (g.Access == want || g.Access == dtnflowv1alpha1.GrantReadWrite) {
			paths = append(paths, g.Paths)
		}
	}
	if len(paths) == 0 {
		return refuse(ReasonNotGranted, "TransferPeer %s grants no %s access to endpoint %s", peer.Name, want, rt.Spec.Endpoint)
	}
	asked := rt.Spec.Paths
	if rt.Spec.Side == dtnflowv1alpha1.RemoteSideDestination {
		asked = []dtnflowv1alpha1.RelativePath{rt.Spec.Path}
	}
	for _, p := range asked {
		if !slices.ContainsFunc(paths, func(prefixes []dtnflowv1alpha1.RelativePath) bool { return underAny(string(p), prefixes) }) {
			return refuse(ReasonPathNotGranted, "TransferPeer %s grants %s access to endpoint %s only under %s, not to %s", peer.Name, want, rt.Spec.Endpoint, describePrefixes(paths), showPath(string(p)))
		}
	}
	if ep == nil {
		return refuse(ReasonRemoteEndpointAbsent, "endpoint %s does not exist at this site", rt.Spec.Endpoint)
	}
	if want == dtnflowv1alpha1.GrantWrite && ep.Spec.Storage.ReadOnly {
		return refuse(ReasonDestinationReadOnly, "endpoint %s has spec.storage.readOnly set and can only be a source", ep.Name)
	}
	return nil
}

// requiresEncryption reads spec.requireEncryption, true when absent.
func requiresEncryption(peer *dtnflowv1alpha1.TransferPeer) bool {
	return peer.Spec.RequireEncryption == nil || *peer.Spec.RequireEncryption
}

func inFlightOr(m dtnflowv1alpha1.InFlightCheck) string {
	if m == "" {
		return string(dtnflowv1alpha1.InFlightAuthenticated)
	}
	return string(m)
}

// underAny says whether p is one of the prefixes or under one; no prefix means the
// whole root.
func underAny(p string, prefixes []dtnflowv1alpha1.RelativePath) bool {
	if len(prefixes) == 0 {
		return true
	}
	p = path.Clean("/" + p)
	for _, pre := range prefixes {
		q := path.Clean("/" + string(pre))
		if q == "/" || p == q || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

func describePrefixes(lists [][]dtnflowv1alpha1.RelativePath) string {
	var all []string
	for _, l := range lists {
		for _, p := range l {
			all = append(all, string(p)+"/")
		}
	}
	return strings.Join(all, ", ")
}

func showPath(p string) string {
	if p == "" {
		return "the root"
	}
	return p
}
