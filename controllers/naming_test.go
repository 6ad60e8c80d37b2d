package controllers

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

func TestChildNames(t *testing.T) {
	long := strings.Repeat("a", 240) + ".b-" + strings.Repeat("c", 10) // 253 characters, a valid job name
	tests := map[string]struct {
		job             string
		wantCoordinator string
		wantSender3     string
		wantLabel       string
	}{
		"short name is kept": {
			job: "calib-0427", wantCoordinator: "calib-0427-coordinator", wantSender3: "calib-0427-s3-send", wantLabel: "calib-0427",
		},
		"name at the longest prefix is kept": {
			job: strings.Repeat("x", 241), wantCoordinator: strings.Repeat("x", 241) + "-coordinator",
			wantSender3: strings.Repeat("x", 241) + "-s3-send", wantLabel: strings.Repeat("x", 54) + "-" + shortHash(strings.Repeat("x", 241), 8),
		},
		"longest name is cut with a hash": {
			job:             long,
			wantCoordinator: strings.Repeat("a", 232) + "-" + shortHash(long, 8) + "-coordinator",
			wantSender3:     strings.Repeat("a", 232) + "-" + shortHash(long, 8) + "-s3-send",
			wantLabel:       strings.Repeat("a", 54) + "-" + shortHash(long, 8),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := CoordinatorPodName(tc.job); got != tc.wantCoordinator {
				t.Errorf("CoordinatorPodName = %q, want %q", got, tc.wantCoordinator)
			}
			if got := AgentPodName(tc.job, contract.RoleSender, 3); got != tc.wantSender3 {
				t.Errorf("sender name = %q, want %q", got, tc.wantSender3)
			}
			if got := JobLabelValue(tc.job); got != tc.wantLabel {
				t.Errorf("JobLabelValue = %q, want %q", got, tc.wantLabel)
			}
		})
	}
}

// TestChildNamesAreValid checks every child name and label value is valid for any valid
// job name, and that two long names differing only at the end still get distinct
// children.
func TestChildNamesAreValid(t *testing.T) {
	jobs := []string{
		"a", "transfer-1", strings.Repeat("a", 63), strings.Repeat("a", 64),
		strings.Repeat("b", 241), strings.Repeat("b", 242), strings.Repeat("c", 253),
		strings.Repeat("d", 231) + "-x" + strings.Repeat("e", 19), // the cut falls after a '-'
		strings.Repeat("d", 231) + ".x" + strings.Repeat("e", 19), // … after a '.'
		strings.Repeat("f", 53) + ".g" + strings.Repeat("h", 50),  // the label cut falls after a '.'
	}
	for _, job := range jobs {
		if errs := validation.IsDNS1123Subdomain(job); len(errs) > 0 {
			t.Fatalf("test input %q is not a valid job name: %v", job, errs)
		}
		names := []string{
			CoordinatorPodName(job), SecretName(job), CoordinatorAccountName(job),
			AgentPodName(job, contract.RoleSender, 0), AgentPodName(job, contract.RoleReceiver, 4095),
			StripeName(job, 511), PathProfileName(job, job),
		}
		for _, n := range names {
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				t.Errorf("job %q: child name %q is invalid: %v", job, n, errs)
			}
		}
		if errs := validation.IsValidLabelValue(JobLabelValue(job)); len(errs) > 0 {
			t.Errorf("job %q: label value %q is invalid: %v", job, JobLabelValue(job), errs)
		}
		if k, ok := stripeIndex(job, StripeName(job, 17)); !ok || k != 17 {
			t.Errorf("job %q: stripeIndex(StripeName(17)) = %d, %v", job, k, ok)
		}
	}
	a, b := strings.Repeat("z", 250)+"-one", strings.Repeat("z", 250)+"-two"
	if CoordinatorPodName(a) == CoordinatorPodName(b) || JobLabelValue(a) == JobLabelValue(b) {
		t.Errorf("long names sharing a prefix collide: %q", CoordinatorPodName(a))
	}
}

func TestPathProfileName(t *testing.T) {
	if got := PathProfileName("site-a", "site-b"); got != "site-a.site-b" {
		t.Errorf("PathProfileName = %q", got)
	}
	long := PathProfileName(strings.Repeat("s", 200), strings.Repeat("d", 200))
	if len(long) != validation.DNS1123SubdomainMaxLength {
		t.Errorf("long PathProfileName has %d characters", len(long))
	}
}

// TestJobEndpointKeys: a peer site's endpoint is keyed apart from a local endpoint of
// the same name (the index and the sharing view), and its path is its PathProfile's.
func TestJobEndpointKeys(t *testing.T) {
	tests := map[string]struct {
		srcSite, dstSite       string
		wantSrc, wantDst, path string
	}{
		"both local":            {wantSrc: "dtn", wantDst: "dtn", path: "dtn.dtn"},
		"destination at a peer": {dstSite: "site-b", wantSrc: "dtn", wantDst: "site-b/dtn", path: "dtn.site-b.dtn"},
		"source at a peer":      {srcSite: "site-b", wantSrc: "site-b/dtn", wantDst: "dtn", path: "site-b.dtn.dtn"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			job := &dtnflowv1alpha1.TransferJob{Spec: dtnflowv1alpha1.TransferJobSpec{
				Source:      dtnflowv1alpha1.TransferSource{Endpoint: "dtn", Site: tc.srcSite},
				Destination: dtnflowv1alpha1.TransferDestination{Endpoint: "dtn", Site: tc.dstSite}}}
			src, dst := jobEndpointKeys(job)
			if src != tc.wantSrc || dst != tc.wantDst {
				t.Errorf("keys %q, %q; want %q, %q", src, dst, tc.wantSrc, tc.wantDst)
			}
			if got := PathProfileNameFor(job); got != tc.path {
				t.Errorf("path %q, want %q", got, tc.path)
			}
		})
	}
}
