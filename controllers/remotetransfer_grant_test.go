package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// TestGrantProblem checks, rule by rule, what a serving site runs for a peer.
func TestGrantProblem(t *testing.T) {
	peer := func(mutate func(*dtnflowv1alpha1.TransferPeer)) *dtnflowv1alpha1.TransferPeer {
		p := &dtnflowv1alpha1.TransferPeer{ObjectMeta: metav1.ObjectMeta{Name: "site-a"}, Spec: dtnflowv1alpha1.TransferPeerSpec{
			Namespace: "peer-a", RemoteNamespaces: []string{"physics"},
			Grants: []dtnflowv1alpha1.TransferGrant{
				{Endpoint: "dtn", Access: dtnflowv1alpha1.GrantWrite, Paths: []dtnflowv1alpha1.RelativePath{"incoming/site-a"}},
				{Endpoint: "dtn", Access: dtnflowv1alpha1.GrantRead, Paths: []dtnflowv1alpha1.RelativePath{"public", "runs/2024"}},
			}}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	rt := func(side dtnflowv1alpha1.RemoteSide, mutate func(*dtnflowv1alpha1.RemoteTransfer)) *dtnflowv1alpha1.RemoteTransfer {
		r := &dtnflowv1alpha1.RemoteTransfer{ObjectMeta: metav1.ObjectMeta{Namespace: "peer-a", Name: "x"}, Spec: dtnflowv1alpha1.RemoteTransferSpec{
			Origin: dtnflowv1alpha1.RemoteOrigin{Namespace: "physics", Name: "calib"}, Side: side, Endpoint: "dtn",
			Integrity: dtnflowv1alpha1.TransferIntegrity{InFlight: dtnflowv1alpha1.InFlightEncrypted}}}
		if side == dtnflowv1alpha1.RemoteSideSource {
			r.Spec.Paths = []dtnflowv1alpha1.RelativePath{"public/a", "runs/2024/b.h5"}
		} else {
			r.Spec.Path = "incoming/site-a/run1"
		}
		if mutate != nil {
			mutate(r)
		}
		return r
	}
	ep := testEndpoint("dtn", "/srv/dtn", "")
	readOnly := testEndpoint("dtn", "/srv/dtn", "")
	readOnly.Spec.Storage.ReadOnly = true
	dst, src := dtnflowv1alpha1.RemoteSideDestination, dtnflowv1alpha1.RemoteSideSource
	tests := map[string]struct {
		peer *dtnflowv1alpha1.TransferPeer
		rt   *dtnflowv1alpha1.RemoteTransfer
		ep   *dtnflowv1alpha1.TransferEndpoint
		want string // reason, "" for granted
	}{
		"write under the granted path":         {peer(nil), rt(dst, nil), ep, ""},
		"write at the granted path itself":     {peer(nil), rt(dst, func(r *dtnflowv1alpha1.RemoteTransfer) { r.Spec.Path = "incoming/site-a" }), ep, ""},
		"read under two granted paths":         {peer(nil), rt(src, nil), ep, ""},
		"no TransferPeer: revoked":             {nil, rt(dst, nil), ep, ReasonPeerNotFound},
		"namespace not named":                  {peer(nil), rt(dst, func(r *dtnflowv1alpha1.RemoteTransfer) { r.Spec.Origin.Namespace = "chemistry" }), ep, ReasonRemoteNamespace},
		"every namespace":                      {peer(func(p *dtnflowv1alpha1.TransferPeer) { p.Spec.RemoteNamespaces = []string{"*"} }), rt(dst, func(r *dtnflowv1alpha1.RemoteTransfer) { r.Spec.Origin.Namespace = "chemistry" }), ep, ""},
		"clear data refused":                   {peer(nil), rt(dst, func(r *dtnflowv1alpha1.RemoteTransfer) { r.Spec.Integrity.InFlight = "" }), ep, ReasonEncryptionRequired},
		"clear data allowed when not required": {peer(func(p *dtnflowv1alpha1.TransferPeer) { p.Spec.RequireEncryption = ptr.To(false) }), rt(dst, func(r *dtnflowv1alpha1.RemoteTransfer) { r.Spec.Integrity.InFlight = "Authenticated" }), ep, ""},
		"a sibling of the granted path":        {peer(nil), rt(dst, func(r *dtnflowv1alpha1.RemoteTransfer) { r.Spec.Path = "incoming/site-ab" }), ep, ReasonPathNotGranted},
		"the root when a path is granted":      {peer(nil), rt(dst, func(r *dtnflowv1alpha1.RemoteTransfer) { r.Spec.Path = "" }), ep, ReasonPathNotGranted},
		"one source path outside":              {peer(nil), rt(src, func(r *dtnflowv1alpha1.RemoteTransfer) { r.Spec.Paths = append(r.Spec.Paths, "private/x") }), ep, ReasonPathNotGranted},
		"write where only read is granted":     {peer(func(p *dtnflowv1alpha1.TransferPeer) { p.Spec.Grants = p.Spec.Grants[1:] }), rt(dst, nil), ep, ReasonNotGranted},
		"another endpoint":                     {peer(nil), rt(dst, func(r *dtnflowv1alpha1.RemoteTransfer) { r.Spec.Endpoint = "tape" }), nil, ReasonNotGranted},
		"ReadWrite with no paths: anywhere": {peer(func(p *dtnflowv1alpha1.TransferPeer) {
			p.Spec.Grants = []dtnflowv1alpha1.TransferGrant{{Endpoint: "dtn", Access: dtnflowv1alpha1.GrantReadWrite}}
		}), rt(dst, func(r *dtnflowv1alpha1.RemoteTransfer) { r.Spec.Path = "" }), ep, ""},
		"granted, but the endpoint is gone":     {peer(nil), rt(dst, nil), nil, ReasonRemoteEndpointAbsent},
		"granted, but the endpoint is readOnly": {peer(nil), rt(dst, nil), readOnly, ReasonDestinationReadOnly},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := grantProblem(tc.peer, tc.rt, tc.ep)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("refused (%s): %s", got.Reason, got.Message)
			case tc.want != "" && (got == nil || got.Reason != tc.want || !got.Blocking || got.Message == ""):
				t.Errorf("got %+v, want a blocking %s with a message", got, tc.want)
			}
		})
	}
}

// TestRemoteTransferName checks that names stay distinct where namespace and name
// would join alike, and stay short enough for the agents' pod names.
func TestRemoteTransferName(t *testing.T) {
	a := RemoteTransferName(&dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{Namespace: "a-b", Name: "c"}})
	b := RemoteTransferName(&dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "b-c"}})
	if a == b {
		t.Errorf("both %q", a)
	}
	long := RemoteTransferName(&dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: string(make([]byte, 0)) + dnsLong(253)}})
	if len(long) > 253 || len(CoordinatorPodName(long)) > 253 {
		t.Errorf("%d characters, coordinator %d", len(long), len(CoordinatorPodName(long)))
	}
}

func dnsLong(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a'
	}
	return string(b)
}
